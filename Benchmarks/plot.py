#!/usr/bin/env python3
"""The scaling curves of `make bench` as one SVG, from results.json (standard library only).

Panels, each drawn when results.json has its figures: the file store's token call, save and login
against the number of profiles (1 to 10,000); processes refreshing a profile each (1 and 16); a
fleet store change's propagation against the number of hosts (1, 10, 100); the expiry storm's p99
over one refresh, and resident memory per waiting caller, against the number of callers (1,000 to
100,000). The x axes are logarithmic.

    python3 Benchmarks/plot.py [results.json] [out.svg]    (default: .build/bench/results.json, .build/bench/scaling.svg)

run.py calls `write_svg(results, path)` after each run.
"""
import json
import math
import os
import sys
from xml.sax.saxutils import escape

PANEL_WIDTH, PANEL_HEIGHT = 440, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 54, 44
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


class Panel:
    def __init__(self, title, x_label, y_label, series, y_log=False, bounds=()):
        self.title = title
        self.x_label = x_label
        self.y_label = y_label
        # [(label, [(x, y), …])], only series with points.
        self.series = [(label, points) for label, points in series if points]
        self.y_log = y_log
        # [(label, y)]: horizontal dashed lines (targets).
        self.bounds = [(label, y) for label, y in bounds if finite(y) and (y > 0 or not y_log)]


def finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def curve_points(curve, field=None):
    """(x, y) of `curve`, sorted by x: `{x: y}`, or `{x: {field: y}}` with `field` (a tuple of
    fields: the first one present). Keys are numbers or numeric strings; only finite y, positive x."""
    fields = (field,) if isinstance(field, str) else field
    points = []
    for key, value in (curve.items() if isinstance(curve, dict) else ()):
        try:
            x = float(key)
        except (TypeError, ValueError):
            continue
        if fields is not None:
            value = next((value[name] for name in fields if isinstance(value, dict) and name in value), None)
        if finite(value) and x > 0:
            points.append((x, float(value)))
    return sorted(points)


def panels(results):
    chosen = []
    store = results.get("store_curve")
    if isinstance(store, dict):
        chosen.append(Panel(
            "File store: one profile's work vs profiles stored", "profiles in the store", "µs (log)",
            [("token call (new store, one read)", curve_points(store, "token_cold_us")), ("durable save", curve_points(store, "save_us")),
             ("login", curve_points(store, "login_us"))],
            y_log=True))
    procs = results.get("store_procs_wall_ms")
    if isinstance(procs, dict):
        one = (procs.get("20") or {}).get("1")
        chosen.append(Panel(
            "Processes refreshing a profile each: wall time", "processes (one profile each)", "ms",
            [("20 ms round trip", curve_points(procs.get("20"))), ("no round trip", curve_points(procs.get("0")))],
            bounds=[("2× one process (target)", 2 * one if finite(one) else None)]))
    fleet = results.get("fleet_propagation_curve")
    if isinstance(fleet, dict):
        chosen.append(Panel(
            "Fleet store: a change's propagation vs hosts", "hosts (stores listening)", "ms",
            [("p50", curve_points(fleet, ("p50", "p50_ms"))), ("p99", curve_points(fleet, ("p99", "p99_ms")))]))
    storm = results.get("storm_curve")
    if not isinstance(storm, dict):
        # Results without the curve: the figures results.json has always carried.
        storm = {"1000": {"p99_vs_single": results.get("storm_p99_vs_single")},
                 "10000": {"p99_vs_single": results.get("storm_p99_10000_vs_single"),
                           "memory_bytes_per_caller": results.get("storm_memory_bytes_per_caller_10000")},
                 "100000": {"p99_vs_single": results.get("storm_p99_100000_vs_single"),
                            "memory_bytes_per_caller": results.get("storm_memory_bytes_per_caller_100000")}}
    chosen.append(Panel(
        "Expiry storm: waiter p99 over one refresh", "callers waiting for one refresh", "× one refresh (log)",
        [("p99 / one refresh", curve_points(storm, "p99_vs_single"))], y_log=True, bounds=[("2× (target at 10,000)", 2.0)]))
    chosen.append(Panel(
        "Expiry storm: memory per waiting caller", "callers waiting for one refresh", "bytes",
        [("resident bytes per caller", curve_points(storm, "memory_bytes_per_caller"))]))
    return [panel for panel in chosen if panel.series]


def tick_label(value):
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2g}" if value < 1 else f"{value:.3g}"


def nice_step(span, count=5):
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= raw:
            return factor * magnitude
    return 10 * magnitude


def draw(panel):
    width, height = PANEL_WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM
    xs = sorted({x for _, points in panel.series for x, _ in points})
    ys = [y for _, points in panel.series for _, y in points] + [y for _, y in panel.bounds]
    # x: logarithmic, ticks at the measured sizes, a margin of a tenth of the span on each side.
    low, high = math.log10(xs[0]), math.log10(xs[-1])
    margin = (high - low) * 0.1 if high > low else 0.5
    x_low, x_high = low - margin, high + margin

    def x_at(x):
        return LEFT + (math.log10(x) - x_low) / (x_high - x_low) * width

    if panel.y_log:
        positive = [y for y in ys if y > 0]
        y_low = math.floor(math.log10(min(positive))) if positive else 0
        y_high = math.ceil(math.log10(max(positive))) if positive else 1
        if y_high <= y_low:
            y_high = y_low + 1
        y_ticks = [10.0 ** power for power in range(y_low, y_high + 1)]

        def y_at(y):
            return TOP + height - (math.log10(y) - y_low) / (y_high - y_low) * height
    else:
        top = max(max(ys) * 1.08, 1e-9)
        step = nice_step(top)
        y_high = step * math.ceil(top / step)
        y_ticks = [step * index for index in range(int(round(y_high / step)) + 1)]

        def y_at(y):
            return TOP + height - y / y_high * height

    parts = [f'<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{escape(panel.title)}</text>']
    # The legend, in a row under the title.
    legend_x = LEFT
    for index, (label, _) in enumerate(panel.series):
        color = COLORS[index % len(COLORS)]
        parts.append(f'<line x1="{legend_x}" y1="34" x2="{legend_x + 16}" y2="34" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{legend_x + 20}" y="38">{escape(label)}</text>')
        legend_x += 28 + 6 * len(label)
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{width}" height="{height}" fill="none" stroke="#999"/>')
    for y in y_ticks:
        position = y_at(y) if (y > 0 or not panel.y_log) else None
        if position is None:
            continue
        parts.append(f'<line x1="{LEFT}" y1="{position:.1f}" x2="{LEFT + width}" y2="{position:.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{position + 4:.1f}" text-anchor="end">{escape(tick_label(y))}</text>')
    for x in xs:
        position = x_at(x)
        parts.append(f'<line x1="{position:.1f}" y1="{TOP}" x2="{position:.1f}" y2="{TOP + height}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{position:.1f}" y="{TOP + height + 16}" text-anchor="middle">{escape(tick_label(x))}</text>')
    parts.append(f'<text x="{LEFT + width / 2:.1f}" y="{PANEL_HEIGHT - 8}" text-anchor="middle">{escape(panel.x_label)} (log)</text>')
    parts.append(f'<text x="16" y="{TOP + height / 2:.1f}" text-anchor="middle" transform="rotate(-90 16 {TOP + height / 2:.1f})">{escape(panel.y_label)}</text>')
    for label, y in panel.bounds:
        position = y_at(y)
        parts.append(f'<line x1="{LEFT}" y1="{position:.1f}" x2="{LEFT + width}" y2="{position:.1f}" stroke="#666" stroke-dasharray="5,4"/>')
        parts.append(f'<text x="{LEFT + width - 4}" y="{position - 4:.1f}" text-anchor="end" fill="#666">{escape(label)}</text>')
    for index, (label, points) in enumerate(panel.series):
        color = COLORS[index % len(COLORS)]
        shown = [(x, y) for x, y in points if y > 0 or not panel.y_log]
        if len(shown) > 1:
            path = " ".join(f"{x_at(x):.1f},{y_at(y):.1f}" for x, y in shown)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in shown:
            parts.append(f'<circle cx="{x_at(x):.1f}" cy="{y_at(y):.1f}" r="3" fill="{color}"><title>{escape(label)}: {escape(tick_label(y))}</title></circle>')
    return parts


def render(results):
    """The SVG text, or None when results.json has nothing to draw."""
    chosen = panels(results)
    if not chosen:
        return None
    columns = 2 if len(chosen) > 1 else 1
    rows = (len(chosen) + columns - 1) // columns
    width, height = columns * PANEL_WIDTH, rows * PANEL_HEIGHT
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'font-family="sans-serif" font-size="11">',
             '<rect width="100%" height="100%" fill="white"/>']
    for index, panel in enumerate(chosen):
        parts.append(f'<g transform="translate({(index % columns) * PANEL_WIDTH},{(index // columns) * PANEL_HEIGHT})">')
        parts.extend(draw(panel))
        parts.append('</g>')
    parts.append('</svg>')
    return "\n".join(parts) + "\n"


def write_svg(results, path):
    """Writes the plot of `results` (results.json's object) to `path`; False when there is nothing
    to draw (nothing is written then)."""
    svg = render(results)
    if svg is None:
        return False
    with open(path, "w") as out:
        out.write(svg)
    return True


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, ".build", "bench", "results.json")
    target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, ".build", "bench", "scaling.svg")
    with open(source) as results_file:
        if not write_svg(json.load(results_file), target):
            raise SystemExit(f"plot: {source} has no curve to draw")
    print(target)
