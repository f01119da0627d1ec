//! [`Table`]: the one table type of serl's reports. A report builds its
//! rows once and renders them where it needs them: Markdown for
//! `report.md` (which the HTML page is rendered from), an HTML fragment,
//! or aligned plain text for a terminal.

use pulldown_cmark::{html::push_html, Options, Parser};

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Align {
    /// The renderer's own (Markdown `---`; the report's style right-aligns
    /// all but the first two columns).
    #[default]
    Default,
    /// To the right (Markdown `---:`): numbers.
    Right,
}

/// A header and rows of cells, rendered as Markdown, HTML or text.
///
/// ```
/// let mut t = serl_report::Table::new(["run", "PA"]).right([1]);
/// t.row(["full", "1.250"]);
/// assert_eq!(t.markdown(), "| run | PA |\n|---|---:|\n| full | 1.250 |\n");
/// assert_eq!(t.terminal(), "run      PA\nfull  1.250\n");
/// assert!(t.html().contains("<td>full</td>"));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column names, each column's alignment
    /// the renderer's own.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Default; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// Right-aligns the columns `cols` (by position).
    pub fn right(mut self, cols: impl IntoIterator<Item = usize>) -> Self {
        for c in cols {
            if let Some(a) = self.align.get_mut(c) {
                *a = Align::Right;
            }
        }
        self
    }

    /// Adds a row; a short row is padded with empty cells.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(row.len().max(self.header.len()), String::new());
        self.rows.push(row);
    }

    /// The column names.
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The rows, each as long as the header at least.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The rows added so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table in Markdown (GitHub's tables): a line a row, each ending
    /// in a newline.
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let rule: Vec<&str> = self
            .align
            .iter()
            .map(|a| match a {
                Align::Default => "---",
                Align::Right => "---:",
            })
            .collect();
        let mut md = line(&self.header);
        md.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            md.push_str(&line(r));
        }
        md
    }

    /// The table as an HTML fragment (`<table>`), as the report's page
    /// renders it.
    pub fn html(&self) -> String {
        let md = self.markdown();
        let mut out = String::new();
        push_html(&mut out, Parser::new_ext(&md, Options::ENABLE_TABLES));
        out
    }

    /// The table as aligned plain text for a terminal: columns two spaces
    /// apart, numbers (right-aligned columns) flush right, the rest left.
    pub fn terminal(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .zip(&self.align)
                .map(|((s, &w), a)| match a {
                    Align::Right => format!("{s:>w$}"),
                    Align::Default => format!("{s:<w$}"),
                })
                .collect();
            format!("{}\n", padded.join("  ").trim_end())
        };
        std::iter::once(&self.header)
            .chain(&self.rows)
            .map(|r| line(r))
            .collect()
    }
}
