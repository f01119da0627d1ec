//! Markdown to one self-contained HTML page.

use pulldown_cmark::{html::push_html, Event, Options, Parser, Tag, TagEnd};

/// The page's style: readable tables with numbers right-aligned, code
/// blocks that keep their lines, figures with captions.
const STYLE: &str = "body{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222;line-height:1.45}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}\
figure{margin:1.5em 0}figcaption{color:#666;font-size:90%}\
td{overflow-wrap:anywhere}code{background:#f5f5f5;padding:0 3px}\
pre{background:#f5f5f5;padding:8px 12px;white-space:pre-wrap;overflow-wrap:anywhere}pre code{padding:0}";

/// Renders `md` (CommonMark with tables) as a self-contained HTML page.
/// Each image in it is replaced, in order, by the SVG of `svgs` with the
/// same position, captioned with its title, so the page needs no files
/// beside it.
pub fn html(md: &str, svgs: &[(String, String)]) -> String {
    let mut plot = 0;
    let mut in_image = false;
    let events = Parser::new_ext(md, Options::ENABLE_TABLES).filter_map(|event| match event {
        Event::Start(Tag::Image { .. }) => {
            in_image = true;
            let figure = svgs.get(plot).map(|(title, svg)| {
                format!(
                    "<figure>{svg}<figcaption>{}</figcaption></figure>",
                    escape(title)
                )
            });
            plot += 1;
            Some(Event::InlineHtml(figure.unwrap_or_default().into()))
        }
        Event::End(TagEnd::Image) => {
            in_image = false;
            None
        }
        // The image's alt text: the caption says it.
        _ if in_image => None,
        e => Some(e),
    });
    let mut body = String::new();
    push_html(&mut body, events);
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>serl report</title>\n<style>{STYLE}</style></head><body>\n{body}</body></html>\n"
    )
}

/// `s` as the text of a Markdown table cell: its `|` escaped, so that a
/// value such as `|r|` stays in its cell.
pub fn table_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_code_blocks_and_tables_render_as_html() {
        let md = "# Run\n\n### reward\n\n```\nstep_pa\n  - 2 * done\n```\n\n| a | b |\n|---|---|\n| 1 | `x` |\n";
        let page = html(md, &[]);
        assert!(page.contains("<h3>reward</h3>"), "{page}");
        assert!(
            page.contains("<pre><code>step_pa\n  - 2 * done\n</code></pre>"),
            "{page}"
        );
        assert!(page.contains("<td><code>x</code></td>"), "{page}");
        assert!(!page.contains("###"), "{page}");
    }

    #[test]
    fn a_pipe_inside_a_cell_stays_in_its_cell() {
        let md = format!(
            "| check | value |\n|---|---|\n| {} | 1 |\n",
            table_cell("autocorrelation of |r|")
        );
        let page = html(&md, &[]);
        assert!(
            page.contains("<td>autocorrelation of |r|</td><td>1</td>"),
            "{page}"
        );
    }

    #[test]
    fn images_become_the_given_svgs_in_order() {
        let md = "![first](a.svg)\n\ntext\n\n![second](b.svg)\n\n![third](c.svg)\n";
        let svgs = [
            ("One & only".to_string(), "<svg id=\"1\"></svg>".to_string()),
            ("Two".to_string(), "<svg id=\"2\"></svg>".to_string()),
        ];
        let page = html(md, &svgs);
        let one = page.find("<svg id=\"1\">").unwrap();
        let two = page.find("<svg id=\"2\">").unwrap();
        assert!(one < two);
        assert!(page.contains("<figcaption>One &amp; only</figcaption>"));
        let body = &page[page.find("<body>").unwrap()..];
        assert!(
            !body.contains("first") && !body.contains("third"),
            "alt texts give way to the captions: {body}"
        );
    }
}
