//! The overview `/`: the mesh, its epoch and members online; every
//! member's books and roots; the moots this node hosts; and a form to
//! start a moot between two books of two members (posted to `/moots`,
//! under the listener's write rules).

use std::fmt::Write;

use crate::api::dto;

use super::html::{esc, short_hex, utc};

/// What the overview shows, gathered by the handler.
pub struct Overview {
    pub info: dto::NodeInfo,
    /// `Err`: why there is no mesh view (no mesh yet).
    pub mesh: Result<dto::MeshStatus, String>,
    pub roots: dto::RootsView,
    pub moots: dto::MootList,
}

pub fn render(o: &Overview) -> String {
    let mut b = String::new();
    b.push_str("<h1>This grove node</h1>");
    let _ = write!(
        b,
        "<p>Node {} · grove {}</p>",
        short_hex(&o.info.peer_id),
        esc(&o.info.version)
    );
    mesh_section(&mut b, &o.mesh);
    let choices = books_section(&mut b, &o.roots);
    moots_section(&mut b, &o.moots);
    start_section(&mut b, &choices);
    super::html::page("Overview", &b, &[])
}

/// A book the start form offers: its `PEER:KEY` and how it is named.
struct BookChoice {
    value: String,
    text: String,
}

/// The mesh, its epoch and its members, online or not.
fn mesh_section(b: &mut String, mesh: &Result<dto::MeshStatus, String>) {
    b.push_str("<section aria-labelledby=\"mesh-h\"><h2 id=\"mesh-h\">Mesh</h2>");
    match mesh {
        Ok(m) => {
            let online = m.members.iter().filter(|x| x.online).count();
            let _ = write!(
                b,
                "<p><strong>{}</strong> · epoch {} · {} of {} members online · roster {}</p><ul class=\"members\">",
                esc(&m.name),
                m.epoch,
                online,
                m.members.len(),
                short_hex(&m.roster_hash)
            );
            for x in &m.members {
                let _ = write!(
                    b,
                    "<li><span class=\"badge {}\">{}</span> <strong>{}</strong> {}</li>",
                    if x.online { "s-running" } else { "s-paused" },
                    if x.online { "online" } else { "offline" },
                    esc(&x.name),
                    short_hex(&x.peer_id)
                );
            }
            b.push_str("</ul>");
        }
        Err(why) => {
            let _ = write!(b, "<p>{}</p>", esc(why));
        }
    }
    b.push_str("</section>");
}

/// Every member's announced books, a table each; returns them as the start
/// form's choices.
fn books_section(b: &mut String, roots: &dto::RootsView) -> Vec<BookChoice> {
    b.push_str("<section aria-labelledby=\"books-h\"><h2 id=\"books-h\">Books and roots</h2>");
    let mut choices = Vec::new();
    if roots.roots.is_empty() {
        b.push_str("<p>No member has announced a book yet.</p>");
    }
    for m in &roots.roots {
        let _ = write!(
            b,
            "<h3>{} <small>{}, announced {}</small></h3><table><thead><tr><th scope=\"col\">Book</th>\
             <th scope=\"col\">Key</th><th scope=\"col\">Chunks</th><th scope=\"col\">Root</th></tr></thead><tbody>",
            esc(&m.name),
            short_hex(&m.peer_id),
            esc(&utc(m.time))
        );
        let books: Vec<&dto::AnnouncedBook> =
            m.shards.iter().flat_map(|s| s.books.iter()).collect();
        if books.is_empty() {
            b.push_str("<tr><td colspan=\"4\">no books</td></tr>");
        }
        for book in books {
            let title = book.title.clone().unwrap_or_else(|| book.key.clone());
            let _ = write!(
                b,
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(&title),
                esc(&book.key),
                book.count,
                short_hex(&book.root)
            );
            choices.push(BookChoice {
                value: format!("{}:{}", m.peer_id, book.key),
                text: format!("{title} ({}) on {}", book.key, m.name),
            });
        }
        b.push_str("</tbody></table>");
    }
    b.push_str("</section>");
    choices
}

/// The moots this node hosts, each a link to its page.
fn moots_section(b: &mut String, moots: &dto::MootList) {
    b.push_str("<section aria-labelledby=\"moots-h\"><h2 id=\"moots-h\">Hosted moots</h2>");
    if moots.moots.is_empty() {
        b.push_str("<p>This node hosts no moot yet.</p>");
    } else {
        b.push_str("<ul class=\"moots\">");
        for m in &moots.moots {
            let trees: Vec<String> = m.trees.iter().map(|t| t.title.clone()).collect();
            let _ = write!(
                b,
                "<li><a href=\"/moots/{}\">{}</a> <span class=\"badge s-{}\">{}</span> {}/{} turns{}{}</li>",
                esc(&m.id),
                esc(&trees.join(" ⇄ ")),
                esc(&m.state),
                esc(&m.state),
                m.turns_done,
                m.turns,
                m.topic
                    .as_deref()
                    .map(|t| format!(" · on {}", esc(t)))
                    .unwrap_or_default(),
                m.reason
                    .as_deref()
                    .map(|r| format!(" · {}", esc(r)))
                    .unwrap_or_default(),
            );
        }
        b.push_str("</ul>");
    }
    b.push_str("</section>");
}

/// The form starting a moot between two of the announced books.
fn start_section(b: &mut String, choices: &[BookChoice]) {
    b.push_str("<section aria-labelledby=\"start-h\"><h2 id=\"start-h\">Start a moot</h2>");
    if choices.len() < 2 {
        b.push_str("<p>A moot needs two announced books.</p>");
    } else {
        b.push_str("<form method=\"post\" action=\"/moots\" class=\"start\">");
        for (name, label, pick) in [("a", "First book", 0), ("b", "Second book", 1)] {
            let _ = write!(
                b,
                "<label for=\"tree-{name}\">{label}</label><select id=\"tree-{name}\" name=\"{name}\" required>"
            );
            for (i, choice) in choices.iter().enumerate() {
                let _ = write!(
                    b,
                    "<option value=\"{}\"{}>{}</option>",
                    esc(&choice.value),
                    if i == pick { " selected" } else { "" },
                    esc(&choice.text)
                );
            }
            b.push_str("</select>");
        }
        b.push_str(
            "<label for=\"topic\">Topic</label><input id=\"topic\" name=\"topic\" maxlength=\"200\" placeholder=\"the sea\">\
             <label for=\"turns\">Turns</label><input id=\"turns\" name=\"turns\" type=\"number\" min=\"1\" max=\"200\" value=\"8\">\
             <button type=\"submit\">Start the moot</button></form>",
        );
    }
    b.push_str("</section>");
}
