//! The addresses this node gives others, in its announcements and in the
//! invites it writes: `net.external_addresses` when set, else the bound
//! addresses another host could dial; and, either way, its addresses
//! through the relays it holds a slot on. Read afresh each time: interface
//! addresses and relay reservations come and go while the node runs.

use std::sync::Arc;

use crate::net::Network;
use crate::net::reach::ip_of;
use libp2p::Multiaddr;

/// A cheap handle; [`Advertised::current`] reads the network's addresses now.
#[derive(Clone)]
pub struct Advertised {
    external: Arc<Vec<Multiaddr>>,
    net: Network,
}

impl Advertised {
    pub fn new(external: &[String], net: Network) -> Advertised {
        Advertised {
            external: Arc::new(external.iter().filter_map(|a| a.parse().ok()).collect()),
            net,
        }
    }

    pub fn current(&self) -> Vec<Multiaddr> {
        let addresses = self.net.addresses();
        let mut out = direct(&self.external, &addresses.listen);
        for relayed in addresses.relayed {
            if !out.contains(&relayed) {
                out.push(relayed);
            }
        }
        out
    }
}

/// `external` when set, else the `bound` addresses that another host could
/// dial: unspecified ones left out, and loopback ones too when others
/// exist (an invite of only loopback addresses makes a joiner on another
/// host dial itself).
pub fn direct(external: &[Multiaddr], bound: &[Multiaddr]) -> Vec<Multiaddr> {
    if !external.is_empty() {
        return external.to_vec();
    }
    let ip_is = |a: &Multiaddr, test: fn(std::net::IpAddr) -> bool| ip_of(a).is_some_and(test);
    let usable: Vec<Multiaddr> = bound
        .iter()
        .filter(|a| !ip_is(a, |ip| ip.is_unspecified()))
        .cloned()
        .collect();
    let routable: Vec<Multiaddr> = usable
        .iter()
        .filter(|a| !ip_is(a, |ip| ip.is_loopback()))
        .cloned()
        .collect();
    if routable.is_empty() {
        usable
    } else {
        routable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Multiaddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_goes_when_another_address_exists_and_external_wins() {
        let bound = [a("/ip4/127.0.0.1/tcp/4100"), a("/ip4/198.18.1.2/tcp/4100")];
        assert_eq!(direct(&[], &bound), vec![a("/ip4/198.18.1.2/tcp/4100")]);
        assert_eq!(
            direct(&[], &[a("/ip4/127.0.0.1/tcp/4100")]),
            vec![a("/ip4/127.0.0.1/tcp/4100")]
        );
        let external = [a("/dns4/grove.example/tcp/4100")];
        assert_eq!(direct(&external, &bound), external.to_vec());
    }
}
