/**
 * A uPlot chart fed from a live store. The store signals changes; the chart asks the page's
 * redraw queue for a redraw (all deltas since its last one in one setData): one chart per
 * animation frame, paced by what the redraws cost (`RedrawQueue`), and a chart out of view at
 * most once a second (see `request` below). A chart given `drawn` hands uPlot that (the data
 * decimated per pixel, lib/decimate.ts) and keeps `data()` exact for its legend, count and text;
 * zoomed in (a drag on x), it decimates the raw rows in view again.
 */
import { render } from "preact";
import { useLayoutEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { lowerBound } from "../lib/bisect";
import { decimateWindow } from "../lib/decimate";
import { BuildQueue, RedrawQueue } from "../lib/frameBatch";
import type { AlignedData } from "../lib/series";
import { countPoints, MetricStore } from "../lib/series";
import { metricAxis } from "../lib/axes";
import { curveSeries } from "../lib/chartView";
import { PALETTE } from "../lib/palette";
import { cssVar, effectiveTheme, useTheme } from "../lib/theme";

/** A redraw that cost c ms is followed by the next, of any chart on the page, no sooner than this many c later. */
export const REDRAW_SPACING = 8;
/**
 * The least time between two redraws of a chart in view, ms. A redraw of a decimated chart
 * costs little JavaScript, but its canvas is rasterized on the main thread (software canvas)
 * and its legend and attributes restyle the page: unbounded, the redraw queue spent what
 * decimation saved on more redraws (issue #33).
 */
export const ONSCREEN_MS = 250;
/** The least time between two redraws of a chart out of view, ms. */
export const OFFSCREEN_MS = 1000;

/** Every live chart's redraws, one queue for the page (lib/frameBatch.ts). */
const redraws = new RedrawQueue(REDRAW_SPACING);

/**
 * Charts mounted together (a job page's metric charts when its snapshot arrives, Compare's, the
 * device charts) are built one per frame, in mount order (lib/frameBatch.ts): the first at once,
 * before the paint (a layout effect), each other one after the next frame. Built together, the
 * browser painted none of them until all were drawn: 6 charts of 8 ranks × 18,750 steps kept the
 * first paint back 250-590 ms, the loss chart alone 55-155 (issue #34; docs/benchmarks.md).
 */
const builds = new BuildQueue();

export interface ChartProps {
  testId: string;
  title: string;
  /** uPlot options without size; called again when the theme changes. */
  options: (colors: ChartColors) => Omit<uPlot.Options, "width" | "height">;
  /** Every point (the legend's values, the count and the text alternative read it). */
  data: () => AlignedData;
  /**
   * What uPlot draws of `data()` on a plot `px` device pixels wide, when not all of it: its
   * per-pixel min/max decimation (lib/decimate.ts). Zoomed in, the chart decimates `data()`'s
   * rows in view itself (`decimateWindow`).
   */
  drawn?: (px: number) => AlignedData;
  /** The count for `countAttr` without reading `data()` (a store that counts as points arrive). */
  points?: () => number;
  /** Subscribe to "the data changed"; returns the unsubscribe function. */
  subscribe: (onChange: () => void) => () => void;
  /** Attribute that carries the drawn count for tests, e.g. data-points or data-samples. */
  countAttr: string;
  count?: (data: AlignedData) => number;
  height?: number;
}

export interface ChartColors {
  fg: string;
  muted: string;
  grid: string;
  series: string[];
}

function colors(): ChartColors {
  return {
    fg: cssVar("--fg"),
    muted: cssVar("--muted"),
    grid: cssVar("--grid"),
    series: [...PALETTE[effectiveTheme()]], // 20 distinct (lib/palette.ts); the first 8 are --series-1..8
  };
}

/** Axis defaults that follow the theme. */
export function axis(c: ChartColors, extra: uPlot.Axis = {}): uPlot.Axis {
  return { stroke: c.muted, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid, width: 1 }, ...extra };
}

/**
 * The y axes' tick labels as last drawn, kept on the chart's box (`data-y-labels`, a second y
 * axis' `data-y2-labels`, "|"-separated) for the browser tests: the canvas has no text to read.
 */
function recordingLabels(axes: uPlot.Axis[] | undefined, el: HTMLElement): uPlot.Axis[] | undefined {
  return axes?.map((a, i) => {
    const values = a.values;
    if (i === 0 || typeof values !== "function") return a;
    const recorded: uPlot.Axis.DynamicValues = (u, splits, axisIdx, space, incr) => {
      const out = values(u, splits, axisIdx, space, incr);
      const key = i === 1 ? "yLabels" : `y${i}Labels`;
      const text = out.map((v) => String(v)).join("|");
      if (el.dataset[key] !== text) el.dataset[key] = text; // unchanged on most live redraws: no attribute write
      return out;
    };
    return { ...a, values: recorded };
  });
}

/**
 * The chart's text alternative (its `aria-label`, as `role="img"`): what it draws and each
 * series' newest value, e.g. "loss by step: rank 0 0.1234 at step 120". Kept on redraws.
 */
export function describeChart(title: string, plot: Pick<uPlot, "series">, data: AlignedData, xLabel: string): string {
  const xs = data[0];
  if (!xs.length) return `${title}: no data yet`;
  const parts: string[] = [];
  plot.series.slice(1).forEach((series, i) => {
    const col = data[i + 1] as (number | null)[] | undefined;
    if (!col || String(series.label ?? "").endsWith("(raw)")) return;
    for (let k = col.length - 1; k >= 0; k -= 1) {
      const v = col[k];
      if (v == null) continue;
      const shown = typeof series.value === "function" ? series.value(plot as uPlot, v, i + 1, k) : String(v);
      parts.push(`${String(series.label ?? `series ${i + 1}`)} ${shown} at ${xLabel} ${formatX(xs[k]!)}`);
      break;
    }
  });
  const more = parts.length > 8 ? `; and ${parts.length - 8} more` : "";
  return `${title} by ${xLabel}, ${xs.length} points: ${parts.slice(0, 8).join("; ")}${more}`;
}

function formatX(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toPrecision(6);
}

export function Chart({ testId, title, options, data, drawn, points, subscribe, countAttr, count = countPoints, height = 220 }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const theme = useTheme();
  const latest = useRef({ options, data, drawn, points, subscribe, count });
  latest.current = { options, data, drawn, points, subscribe, count };

  // The plot is built and drawn right after the render, before the browser paints (a layout
  // effect): as a plain effect it waited for the next frame, so a chart first painted as an
  // empty box and drew a frame or more later (the first draw, issue #34).
  useLayoutEffect(() => {
    const el = box.current!;
    // every point, read at most once per redraw and only when something asks (a legend, the text)
    let exactData: AlignedData | null = null;
    const exact = () => (exactData ??= latest.current.data());
    // the x range zoomed to (a drag on the x axis), null: all of it
    let zoom: [number, number] | null = null;
    let width = Math.max(200, el.clientWidth); // kept by the ResizeObserver below (no layout read per redraw)
    const toDraw = (): AlignedData => {
      const decimated = latest.current.drawn;
      if (!decimated) return exact();
      const px = Math.round(width * (window.devicePixelRatio || 1));
      return zoom ? decimateWindow(exact(), zoom[0], zoom[1], px) : decimated(px);
    };
    // the series' value formats as given: the legend calls them with the exact value at the drawn x
    let formats: (uPlot.Series["value"] | undefined)[] = [];
    type Format = (self: uPlot, rawValue: number, seriesIdx: number, idx: number | null) => string | number;
    const exactValue =
      (format: Format): Format =>
      (u, v, seriesIdx, dataIdx) => {
        if (dataIdx == null) return format(u, v, seriesIdx, dataIdx);
        const x = u.data[0][dataIdx]!;
        const all = exact();
        const row = lowerBound(all[0], x);
        // a null value (no point at that step) reaches the format as uPlot passes one
        return format(u, (all[0][row] === x ? (all[seriesIdx]?.[row] ?? null) : v) as number, seriesIdx, dataIdx);
      };
    // a zoom in or out (a drag, a double click) draws the raw rows in view, decimated again
    const scaled = (u: uPlot, key: string) => {
      const xs = u.data[0];
      const x = u.scales[key];
      if (key !== "x" || !latest.current.drawn || !xs.length || x?.min == null || x.max == null) return;
      const next: [number, number] | null = x.min <= xs[0]! && x.max >= xs[xs.length - 1]! ? null : [x.min, x.max];
      if (next === zoom || (next && zoom && next[0] === zoom[0] && next[1] === zoom[1])) return;
      zoom = next;
      redraws.request(redraw);
    };
    const build = (data: AlignedData) => {
      const options = latest.current.options(colors());
      formats = options.series.map((s) => s.value);
      const series = latest.current.drawn
        ? options.series.map((s, i) => (i > 0 && typeof s.value === "function" ? { ...s, value: exactValue(s.value) } : s))
        : options.series;
      // the y scale as drawn (data-y-min / data-y-max): a fixed or clipped range is readable by tests
      const drawn = (u: uPlot) => {
        const y = u.scales[Object.keys(u.scales).find((k) => k !== "x") ?? "y"];
        if (y?.min != null && y.max != null) {
          el.dataset.yMin = String(y.min);
          el.dataset.yMax = String(y.max);
        }
      };
      const hooks = { ...options.hooks, draw: [...(options.hooks?.draw ?? []), drawn], setScale: [...(options.hooks?.setScale ?? []), scaled] };
      return new uPlot(
        { ...options, series, hooks, axes: recordingLabels(options.axes, el), width, height },
        data as uPlot.AlignedData,
        el,
      );
    };
    // what tests and assistive technology read: the series drawn, the y range, a text summary
    let described = -Infinity; // when the text alternative was last written (performance.now())
    let describing: ReturnType<typeof setTimeout> | null = null;
    let labelled: uPlot | null = null; // the plot whose series and axes are on the box
    const record = (plot: uPlot) => {
      const { points, count } = latest.current;
      el.setAttribute(countAttr, String(points ? points() : count(exact())));
      if (labelled !== plot) {
        labelled = plot;
        el.dataset.series = plot.series.slice(1).map((series) => String(series.label ?? "")).join("|");
        el.dataset.axes = plot.axes.map((a) => String(a.label ?? "")).join("|");
      }
      // the text alternative at most once a second (a live chart redraws up to every frame),
      // the last one written a second after the redraws stop
      const describe = () => {
        describing = null;
        described = performance.now();
        const xLabel = String(plot.axes[0]?.label ?? plot.series[0]?.label ?? "x");
        // the given formats, called with the exact data's own rows
        const shown = { series: plot.series.map((s, i) => ({ ...s, value: formats[i] ?? s.value })) };
        el.setAttribute("aria-label", describeChart(title, shown, exact(), xLabel));
      };
      if (describing !== null) clearTimeout(describing);
      const wait = described + 1000 - performance.now();
      if (wait <= 0) describe();
      else describing = setTimeout(describe, wait);
    };
    let plot: uPlot | null = null;
    el.style.minHeight = `${height}px`; // a chart waiting for its build keeps its plot's height
    const cancelBuild = builds.add(() => {
      el.style.minHeight = "";
      plot = build(toDraw());
      record(plot);
    });
    let timer: ReturnType<typeof setTimeout> | null = null;
    let lastAt = 0; // when the last redraw began (performance.now())
    let visible = true;
    function redraw() {
      if (!plot) return; // not built yet: its build draws what is there then
      lastAt = performance.now();
      exactData = null;
      const next = toDraw();
      if (next.length !== plot.series.length) {
        // A new series appeared (e.g. another rank): the options describe it, so rebuild.
        plot.destroy();
        zoom = null;
        plot = build(toDraw());
      } else if (zoom) {
        // keep the zoom: the rows in view, the scale where the reader put it (y fits them again)
        plot.setData(next as uPlot.AlignedData, false);
        plot.setScale("x", { min: zoom[0], max: zoom[1] });
      } else {
        plot.setData(next as uPlot.AlignedData);
      }
      record(plot);
    }
    // The page's charts redraw one per frame, the next no sooner than REDRAW_SPACING × the last
    // one's cost after it began (RedrawQueue): long series over many ranks redraw a few times a
    // second instead of filling every frame (issue #33). A chart in view redraws at most every
    // ONSCREEN_MS, one out of view every OFFSCREEN_MS.
    const request = () => {
      if (timer !== null) return;
      const wait = lastAt + (visible ? ONSCREEN_MS : OFFSCREEN_MS) - performance.now();
      if (wait <= 0) redraws.request(redraw);
      else
        timer = setTimeout(() => {
          timer = null;
          redraws.request(redraw);
        }, wait);
    };
    const unsubscribe = latest.current.subscribe(request);
    const resize = new ResizeObserver((entries) => {
      const next = Math.max(200, Math.round(entries[entries.length - 1]?.contentRect.width ?? el.clientWidth));
      if (next === width) return;
      width = next;
      if (!plot) return;
      plot.setSize({ width, height });
      if (latest.current.drawn) redraws.request(redraw); // decimated for the new width
    });
    resize.observe(el);
    const seen = new IntersectionObserver((entries) => {
      visible = entries.some((e) => e.isIntersecting);
    });
    seen.observe(el);
    return () => {
      unsubscribe();
      resize.disconnect();
      seen.disconnect();
      if (timer !== null) clearTimeout(timer);
      if (describing !== null) clearTimeout(describing);
      redraws.cancel(redraw);
      cancelBuild();
      plot?.destroy();
    };
  }, [theme, height, countAttr, title]);

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} data-testid={testId} class="chart-box" role="img" aria-label={title} />
    </figure>
  );
}

/** A loss chart by step over `ranks` ranks, as a job page draws one by default: the warm-up's (and the benchmark's, bench/main.tsx). */
export function lossOptions(c: ChartColors, ranks: number, hooks: uPlot.Hooks.Arrays): Omit<uPlot.Options, "width" | "height"> {
  return {
    scales: { x: { time: false }, y: {} },
    axes: [axis(c, { label: "step" }), axis(c, metricAxis("loss", "loss"))],
    series: [{ label: "step" }, ...curveSeries(Array.from({ length: ranks }, (_, r) => `rank ${r}`), c.series, 0, "loss")],
    legend: { live: true },
    hooks,
  };
}

/**
 * A chart's first draw on a page runs uPlot's, the decimation's and this component's code for
 * the first time, cold: the same draw took 2-4 times as long as warm (issue #34;
 * docs/benchmarks.md). So when the page first idles, `warmUp` draws one small chart over a
 * `MetricStore` of `ranks` × `steps` (decimated, with the job page's loss-chart options; a
 * store's own decimation warms better than `decimate` on plain columns), never attached, and
 * unmounts it: the code a real chart runs is compiled before the first one is built. Resolves
 * when done (or failed: the warm-up is only ever a head start).
 */
export function warmUp(ranks = 2, steps = 8_192): Promise<void> {
  return new Promise<void>((resolve) => {
    const run = () => {
      const el = document.createElement("div"); // never attached: nothing on the page changes
      let finished = false;
      const done = () => {
        if (finished) return;
        finished = true;
        render(null, el);
        performance.measure("chart warm-up", "chart warm-up");
        resolve();
      };
      try {
        performance.mark("chart warm-up");
        // through a store, as a job page draws: its aligned columns and their decimation
        const store = new MetricStore(steps);
        for (let step = 0; step < steps; step += 1)
          for (let rank = 0; rank < ranks; rank += 1) store.add("loss", rank, step, Math.exp(-step / steps) + 0.05 * Math.sin(step / 7 + rank), 1.7e9 + step);
        render(
          <Chart
            testId="chart-warm-up"
            title="loss"
            options={(c) => lossOptions(c, ranks, { draw: [() => setTimeout(done)] })}
            data={() => store.data("loss")}
            drawn={(px) => store.drawn("loss", px)}
            points={() => store.count("loss")}
            subscribe={() => () => undefined}
            countAttr="data-points"
            height={120}
          />,
          el,
        );
      } catch {
        resolve();
      }
    };
    if (typeof requestIdleCallback === "function") requestIdleCallback(run, { timeout: 2_000 });
    else setTimeout(run, 50);
  });
}

if (typeof window !== "undefined" && typeof document !== "undefined") void warmUp();
