//! SVG charts for the reports: lines or points, and histograms as bars.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// What a chart draws besides its data: the title, the axes and how the x
/// axis is labelled.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    title: String,
    x_desc: String,
    y_desc: String,
    points_only: bool,
    integer_x: bool,
    x_labels: Vec<String>,
}

impl Chart {
    /// A line chart with this title and axis descriptions.
    pub fn new(title: &str, x_desc: &str, y_desc: &str) -> Self {
        Chart {
            title: title.into(),
            x_desc: x_desc.into(),
            y_desc: y_desc.into(),
            ..Default::default()
        }
    }

    /// Draws points, not lines.
    pub fn points(mut self) -> Self {
        self.points_only = true;
        self
    }

    /// The x axis counts something (iterations, steps): whole numbers only.
    pub fn integer_x(mut self) -> Self {
        self.integer_x = true;
        self
    }

    /// Names the x positions 0, 1, 2, ... (symbols, say); each gets its
    /// own tick while they fit, and the axis falls back to ranks when
    /// there are too many to read.
    pub fn x_labels(mut self, labels: Vec<String>) -> Self {
        self.x_labels = labels;
        self.integer_x = true;
        self
    }

    /// The chart's title.
    pub fn title(&self) -> &str {
        &self.title
    }
}

/// What drawing a chart can fail with.
pub type PlotResult = Result<(), Box<dyn std::error::Error>>;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Most named x positions drawn as labels; beyond it they are ranks.
const MAX_X_LABELS: usize = 30;

/// Most x labels written upright; more are turned to fit.
const UPRIGHT_LABELS: usize = 10;

/// Axis numbers without a float's noise: large ones whole, with thousands
/// separated; small ones to four decimals at most.
fn y_fmt(y: &f64) -> String {
    if y.abs() >= 1e4 {
        let digits = format!("{:.0}", y.abs());
        let mut out = String::new();
        for (k, c) in digits.chars().enumerate() {
            if k > 0 && (digits.len() - k) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        if *y < 0.0 {
            out.insert(0, '-');
        }
        out
    } else {
        // Four decimals at most, without trailing zeros: ticks land on
        // round numbers, their float sums do not.
        let s = format!("{y:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s == "-0" {
            "0".into()
        } else {
            s.into()
        }
    }
}

type Series = (String, Vec<(f64, f64)>);

fn bounds(series: &[Series], y_floor: Option<f64>) -> (f64, f64, f64, f64) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in series.iter().flat_map(|s| s.1.iter()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if let Some(f) = y_floor {
        y0 = y0.min(f);
    }
    (x0, x1, y0, y1)
}

type Plot<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws the legend and writes the chart out.
fn legend_and_present<'b>(
    ctx: &mut Plot<'b, 'b>,
    root: &DrawingArea<SVGBackend<'b>, Shift>,
) -> PlotResult {
    legend_at_and_present(ctx, root, SeriesLabelPosition::MiddleRight)
}

fn legend_at_and_present<'b>(
    ctx: &mut Plot<'b, 'b>,
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    at: SeriesLabelPosition,
) -> PlotResult {
    ctx.configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A line (or point) chart as an SVG string; used by every serl report.
pub fn lines_chart(svg: &mut String, chart: &Chart, series: &[Series]) -> PlotResult {
    let (mut x0, mut x1, y0, y1) = bounds(series, None);
    if chart.integer_x {
        // A lone point sits in the middle of a unit-wide axis.
        (x0, x1) = (x0.floor() - 0.5, x1.ceil() + 0.5);
    }
    let pad = ((y1 - y0) * 0.05).max(1e-9);
    let named = !chart.x_labels.is_empty() && chart.x_labels.len() <= MAX_X_LABELS;
    let turned = named && chart.x_labels.len() > UPRIGHT_LABELS;
    let root =
        SVGBackend::with_string(svg, (760, if turned { 400 } else { 360 })).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(if turned { 76 } else { 36 })
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1.max(x0 + 1e-9), (y0 - pad)..(y1 + pad))?;
    let x_fmt = |x: &f64| -> String {
        if named {
            let k = x.round();
            if (x - k).abs() > 1e-6 || k < 0.0 {
                return String::new();
            }
            return chart.x_labels.get(k as usize).cloned().unwrap_or_default();
        }
        if chart.integer_x {
            if (x - x.round()).abs() > 1e-6 {
                return String::new();
            }
            return format!("{}", x.round() as i64);
        }
        format!("{x}")
    };
    let mut mesh = ctx.configure_mesh();
    // Too many names to read: the axis counts ranks instead.
    let x_desc = if chart.x_labels.is_empty() || named {
        chart.x_desc.clone()
    } else {
        format!("{} rank", chart.x_desc)
    };
    mesh.x_desc(x_desc)
        .y_desc(&chart.y_desc)
        .x_label_formatter(&x_fmt);
    if chart.integer_x {
        // One tick per whole number while they fit: plotters' automatic
        // ticks would land between them.
        let span = (x1 - x0).round() as usize;
        mesh.x_labels(span.clamp(2, if named { MAX_X_LABELS + 1 } else { 12 }) + 1);
    }
    if turned {
        mesh.x_label_style(
            ("sans-serif", 12)
                .into_font()
                .transform(FontTransform::Rotate90),
        );
    }
    mesh.y_label_formatter(&y_fmt);
    mesh.draw()?;
    let radius = if series.iter().map(|s| s.1.len()).max().unwrap_or(0) > 100 {
        2
    } else {
        4
    };
    for (k, (name, pts)) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        if chart.points_only {
            ctx.draw_series(pts.iter().map(|&p| Circle::new(p, radius, color.filled())))?
                .label(name.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
        } else {
            ctx.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
    }
    legend_and_present(&mut ctx, &root)
}

/// Histograms as bars: each series is a list of (bin centre, height) over
/// bins `bin_width` wide, drawn as translucent bars over each other so
/// that every distribution stays visible.
pub fn bars_chart(
    svg: &mut String,
    chart: &Chart,
    series: &[Series],
    bin_width: f64,
) -> PlotResult {
    let (x0, x1, _, y1) = bounds(series, Some(0.0));
    let half = bin_width / 2.0;
    let root = SVGBackend::with_string(svg, (760, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(
            (x0 - half)..(x1 + half).max(x0 + 1e-9),
            0.0..(y1 * 1.05).max(1e-9),
        )?;
    ctx.configure_mesh()
        .x_desc(&chart.x_desc)
        .y_desc(&chart.y_desc)
        .draw()?;
    for (k, (name, bins)) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        ctx.draw_series(bins.iter().filter(|b| b.1 > 0.0).map(|&(x, h)| {
            Rectangle::new([(x - half, 0.0), (x + half, h)], color.mix(0.3).filled())
        }))?
        .label(name.clone())
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.6).filled())
        });
        ctx.draw_series(bins.iter().filter(|b| b.1 > 0.0).map(|&(x, h)| {
            Rectangle::new([(x - half, 0.0), (x + half, h)], color.stroke_width(1))
        }))?;
    }
    legend_and_present(&mut ctx, &root)
}

/// One series of estimates: a name and, per named x position, the mean
/// and its interval (low, high).
pub type Intervals = (String, Vec<(f64, f64, f64)>);

/// Estimates with their intervals at named positions (strategies, say): a
/// dot at each mean and a whisker over its interval, the series side by
/// side at each position, with a line at zero. `chart` names the
/// positions ([`Chart::x_labels`]).
pub fn intervals_chart(svg: &mut String, chart: &Chart, series: &[Intervals]) -> PlotResult {
    let positions = chart.x_labels.len().max(1);
    let (mut y0, mut y1) = (0f64, 0f64);
    for &(m, lo, hi) in series.iter().flat_map(|s| s.1.iter()) {
        y0 = y0.min(lo.min(m));
        y1 = y1.max(hi.max(m));
    }
    let pad = ((y1 - y0) * 0.08).max(1e-6);
    // Room above the whiskers for the legend (upper right).
    let legend_room = (y1 - y0) * 0.2 * series.len() as f64;
    // Wider where many positions need their labels apart.
    let width = (70 * positions as u32 + 120).max(760);
    let root = SVGBackend::with_string(svg, (width, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(
            -0.5..(positions as f64 - 0.5),
            (y0 - pad)..(y1 + pad + legend_room),
        )?;
    let x_fmt = |x: &f64| -> String {
        let k = x.round();
        if (x - k).abs() > 1e-6 || k < 0.0 {
            return String::new();
        }
        chart.x_labels.get(k as usize).cloned().unwrap_or_default()
    };
    ctx.configure_mesh()
        .x_desc(&chart.x_desc)
        .y_desc(&chart.y_desc)
        .x_labels(positions + 1)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .draw()?;
    ctx.draw_series(std::iter::once(PathElement::new(
        vec![(-0.5, 0.0), (positions as f64 - 0.5, 0.0)],
        BLACK.mix(0.5).stroke_width(1),
    )))?;
    let width = 0.6 / series.len().max(1) as f64;
    for (k, (name, points)) in series.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let shift = (k as f64 - (series.len() as f64 - 1.0) / 2.0) * width;
        let at = |i: usize| i as f64 + shift;
        ctx.draw_series(points.iter().enumerate().map(|(i, &(_, lo, hi))| {
            PathElement::new(vec![(at(i), lo), (at(i), hi)], color.stroke_width(2))
        }))?;
        ctx.draw_series(
            points
                .iter()
                .enumerate()
                .map(|(i, &(m, _, _))| Circle::new((at(i), m), 4, color.filled())),
        )?
        .label(name.clone())
        .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
    }
    // Upper right, in the room kept above the whiskers.
    legend_at_and_present(&mut ctx, &root, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_draw_one_whisker_per_estimate() {
        let mut svg = String::new();
        let chart =
            Chart::new("team PA", "strategy", "bps").x_labels(vec!["twap".into(), "mappo".into()]);
        let series = vec![
            (
                "dynamic".to_string(),
                vec![(-1.0, -2.0, 0.5), (1.5, 0.2, 2.9)],
            ),
            (
                "static".to_string(),
                vec![(0.3, -0.1, 0.7), (0.4, 0.0, 0.9)],
            ),
        ];
        intervals_chart(&mut svg, &chart, &series).unwrap();
        assert!(
            svg.contains("mappo") && svg.contains("dynamic"),
            "labels and legend"
        );
        assert_eq!(
            svg.matches("<circle").count(),
            4 + 2,
            "a dot per estimate, one per legend entry"
        );
    }

    #[test]
    fn axis_numbers_read_as_people_write_them() {
        assert_eq!(y_fmt(&0.7000000000000001), "0.7");
        assert_eq!(y_fmt(&-0.0), "0");
        assert_eq!(y_fmt(&12.0), "12");
        assert_eq!(y_fmt(&167.5), "167.5");
        assert_eq!(y_fmt(&30_000_000.0), "30,000,000");
        assert_eq!(y_fmt(&-12_345.0), "-12,345");
    }
}
