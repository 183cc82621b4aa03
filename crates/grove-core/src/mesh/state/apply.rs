//! Applying a checked commit: the roster tree, fork choice's new tip,
//! secrets kept and erasures scheduled.

use super::*;

impl MeshState {
    /// Fully checks a commit against its parent roster (which this node must have).
    pub(super) fn check_commit(
        &self,
        id: &Identity,
        signed: &wire::Signed,
    ) -> Result<CheckedCommit, MeshError> {
        let parsed = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")?;
        let commit = &parsed.msg;
        let core: wire::CommitCore = codec::decode_canonical(&commit.core, "commit core")?;
        let mesh_id = self.mesh_id()?;
        if core.mesh_id != mesh_id {
            return Err(MeshError::WrongMesh("commit"));
        }
        let next_hash = codec::hash(label::ROSTER, &commit.next_roster);
        if self.rosters.contains_key(&next_hash) {
            return Err(MeshError::Duplicate("commit"));
        }
        let prev_hash = bytes32(&core.prev_roster_hash, "commit parent")?;
        let Some(prev) = self.rosters.get(&prev_hash) else {
            // Built on a roster this node does not have: an old branch, or this node is behind.
            if core.new_epoch <= self.epoch() {
                return Err(MeshError::StaleEpoch {
                    what: "commit",
                    got: core.new_epoch,
                    current: self.epoch(),
                });
            }
            return Err(MeshError::UnknownRoster {
                what: "commit",
                epoch: core.new_epoch,
            });
        };
        check_commit_against(
            Some(id),
            &prev.roster,
            &prev_hash,
            &parsed,
            &core,
            &self.votes,
        )
    }
}

/// Extends this node's tree below a roster it holds without parent (the
/// roster a joiner was welcomed from, trusted on first use, §8): when
/// `commits` hold the commit that made that roster (its core hashes to the
/// roster's `commit_hash`) and the commit that made its parent (whose next
/// roster hashes to the parent hash that core names), the parent is trusted
/// by those hashes, and the first commit is checked in full against it.
/// Repeated down as far as the commits reach, so that a joiner whose
/// welcome came from a losing sibling can reach the fork point and follow
/// the fork choice like everyone else (§9, §11).
pub(super) fn tx_link_roots(tx: &mut Tx, id: &Identity, commits: &[wire::Signed]) {
    let Ok(mesh_id) = tx.s.mesh_id() else {
        return;
    };
    // Each commit by the hash of the roster it makes.
    let mut by_next: BTreeMap<[u8; 32], (&wire::Signed, wire::Commit)> = BTreeMap::new();
    for c in commits {
        let Ok(parsed) = codec::parse_signed::<wire::Commit>(c, tag::COMMIT, "commit") else {
            continue;
        };
        by_next.insert(
            codec::hash(label::ROSTER, &parsed.msg.next_roster),
            (c, parsed.msg),
        );
    }
    for _ in 0..commits.len() {
        let mut linked = false;
        for root in tx.s.unlinked_roots() {
            let Some((signed, commit)) = by_next.get(&root.hash) else {
                continue;
            };
            if codec::hash(label::COMMIT, &commit.core) != root.roster.commit_hash {
                continue;
            }
            let Ok(core) = codec::decode_canonical::<wire::CommitCore>(&commit.core, "commit core")
            else {
                continue;
            };
            let Ok(parent_hash) = bytes32(&core.prev_roster_hash, "commit parent") else {
                continue;
            };
            let parent = match tx.s.rosters.get(&parent_hash) {
                Some(p) => p.clone(),
                None => {
                    let Some((_, made_parent)) = by_next.get(&parent_hash) else {
                        continue;
                    };
                    let Ok(roster) = Roster::decode(&made_parent.next_roster) else {
                        continue;
                    };
                    if roster.mesh_id != mesh_id {
                        continue;
                    }
                    Arc::new(RosterNode {
                        roster,
                        hash: parent_hash,
                        parent: None,
                        commit: None,
                        proposal_hash: None,
                    })
                }
            };
            let Ok(parsed) = codec::parse_signed::<wire::Commit>(signed, tag::COMMIT, "commit")
            else {
                continue;
            };
            let Ok(checked) = check_commit_against(
                Some(id),
                &parent.roster,
                &parent_hash,
                &parsed,
                &core,
                &tx.s.votes,
            ) else {
                continue;
            };
            if checked.node.hash != root.hash {
                continue;
            }
            if !tx.s.rosters.contains_key(&parent_hash) {
                tx.effect(Effect::PutRoster(parent));
            }
            tx.effect(Effect::PutRoster(Arc::new(checked.node)));
            linked = true;
        }
        if !linked {
            break;
        }
    }
}

pub(super) fn tx_apply_commit(
    tx: &mut Tx,
    id: &Identity,
    signed: &wire::Signed,
    now_ms: i64,
) -> Result<(), MeshError> {
    let checked = tx.s.check_commit(id, signed)?;
    tx_insert_checked(tx, id, checked, now_ms);
    Ok(())
}

/// Stores a checked commit's roster and the invite it used, if any.
pub(super) fn tx_put_checked(
    tx: &mut Tx,
    node: RosterNode,
    invite_id: Option<[u8; 16]>,
    proposal_hash: [u8; 32],
) -> Arc<RosterNode> {
    let node = Arc::new(node);
    tx.effect(Effect::PutRoster(node.clone()));
    if let Some(inv) = invite_id {
        tx.effect(Effect::PutUsedInvite {
            id: inv,
            proposal: proposal_hash,
        });
    }
    node
}

/// Adds a checked commit to the tree and moves the tip by the fork-choice rule.
pub(super) fn tx_insert_checked(tx: &mut Tx, id: &Identity, checked: CheckedCommit, now_ms: i64) {
    let CheckedCommit {
        node,
        proposal_hash,
        invite_id,
        mine,
        committer,
        joiner,
    } = checked;
    let node = tx_put_checked(tx, node, invite_id, proposal_hash);
    let hash = node.hash;
    let epoch = node.roster.epoch;
    if let Some(inv) = invite_id
        && let Some(mut rec) = tx.s.invites.get(&inv).cloned()
        && rec.status == InviteStatus::Open
    {
        rec.status = InviteStatus::Used;
        tx.effect(Effect::PutInvite(rec));
    }
    let reader = matches!(mine, OwnEnvelope::Opened(_));
    match mine {
        OwnEnvelope::Opened(secret) => tx.effect(Effect::PutSecret(SecretEntry {
            roster_hash: hash,
            epoch,
            secret: Arc::new(secret),
            erase_at_ms: None,
        })),
        OwnEnvelope::DoesNotOpen => {
            tx.effect(Effect::PutBadEnvelope(BadEnvelope {
                epoch,
                roster_hash: hash,
                commit_hash: node.roster.commit_hash,
                committer: committer.clone(),
                at_ms: now_ms,
            }));
            tx.audit(
                "mesh.envelope.bad",
                json!({"epoch": epoch, "roster_hash": h(&hash),
                       "commit_hash": h(&node.roster.commit_hash),
                       "committer": identity::peer_id_text(&committer)}),
            );
            tx_prove_own_bad_envelope(tx, id, &node, now_ms);
        }
        OwnEnvelope::Absent => {}
    }
    tx.audit(
            "mesh.commit.accept",
            json!({"epoch": epoch, "roster_hash": h(&hash), "commit_hash": h(&node.roster.commit_hash),
                   "proposal": h(&proposal_hash), "joiner": joiner.as_ref().map(|j| identity::peer_id_text(j))}),
        );
    let best = fork_choice(&tx.s.rosters);
    if best != tx.s.tip {
        tx_move_tip(tx, best, now_ms);
    } else if reader {
        // A losing sibling: keep its secret only for the grace window.
        tx_schedule_erase(tx, hash, now_ms);
    }
}

pub(super) fn tx_schedule_erase(tx: &mut Tx, roster_hash: [u8; 32], now_ms: i64) {
    if let Some(mut s) = tx.s.secrets.get(&roster_hash).cloned()
        && s.erase_at_ms.is_none()
    {
        s.erase_at_ms = Some(now_ms.saturating_add(tx.s.timing.key_grace_ms));
        tx.effect(Effect::PutSecret(s));
    }
}

pub(super) fn tx_move_tip(tx: &mut Tx, new_tip: [u8; 32], now_ms: i64) {
    let old_tip = tx.s.tip;
    let Some(node) = tx.s.rosters.get(&new_tip).cloned() else {
        return;
    };
    let switched = node.parent != Some(old_tip);
    tx.effect(Effect::SetTip(new_tip));
    tx.effect(Effect::PutHistory(HistoryEntry {
        epoch: node.roster.epoch,
        roster_hash: new_tip,
        commit_hash: node.roster.commit_hash,
        switched,
        at_ms: now_ms,
    }));
    tx.audit(
        if switched {
            "mesh.switch"
        } else {
            "mesh.epoch"
        },
        json!({"epoch": node.roster.epoch, "roster_hash": h(&new_tip),
                   "members": node.roster.members.len(), "from": h(&old_tip)}),
    );
    let others: Vec<[u8; 32]> =
        tx.s.secrets
            .keys()
            .filter(|k| **k != new_tip)
            .copied()
            .collect();
    for k in others {
        tx_schedule_erase(tx, k, now_ms);
    }
    let stale: Vec<[u8; 32]> =
        tx.s.proposals
            .values()
            .filter(|p| p.roster_hash != new_tip)
            .map(|p| p.hash)
            .collect();
    for p in stale {
        tx.effect(Effect::DeleteProposal(p));
    }
    let closed: Vec<[u8; 32]> =
        tx.s.closed
            .values()
            .filter(|c| c.roster_hash != new_tip)
            .map(|c| c.hash)
            .collect();
    for c in closed {
        tx.effect(Effect::DeleteClosed(c));
    }
    let keep_from = node.roster.epoch.saturating_sub(1);
    if tx.s.votes.keys().any(|(e, _)| *e < keep_from) {
        tx.effect(Effect::DeleteVotesBefore(keep_from));
    }
    if !tx.s.is_member() {
        let open: Vec<InviteRec> =
            tx.s.invites
                .values()
                .filter(|i| i.status == InviteStatus::Open)
                .cloned()
                .collect();
        for mut i in open {
            i.status = InviteStatus::Void;
            tx.effect(Effect::PutInvite(i));
        }
        tx.audit("mesh.removed", json!({"epoch": node.roster.epoch}));
    }
}
