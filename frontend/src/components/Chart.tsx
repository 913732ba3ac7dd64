/**
 * A uPlot chart fed from a live store. The store signals changes; the chart marks itself
 * dirty and redraws at most once per animation frame (all deltas of a frame in one setData),
 * less often when its redraws are costly or it is out of view (see `request` below).
 */
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { AlignedData } from "../lib/series";
import { countPoints } from "../lib/series";
import { PALETTE } from "../lib/palette";
import { cssVar, effectiveTheme, useTheme } from "../lib/theme";

/** A redraw that cost c ms is followed by the next no sooner than this many c later. */
export const REDRAW_SPACING = 8;
/** The least time between two redraws of a chart out of view, ms. */
export const OFFSCREEN_MS = 1000;

export interface ChartProps {
  testId: string;
  title: string;
  /** uPlot options without size; called again when the theme changes. */
  options: (colors: ChartColors) => Omit<uPlot.Options, "width" | "height">;
  data: () => AlignedData;
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

/** The y axis' labels as last drawn, kept on the chart's box (`data-y-labels`, "|"-separated) for the browser tests: the canvas has no text to read. */
function recordingLabels(axes: uPlot.Axis[] | undefined, el: HTMLElement): uPlot.Axis[] | undefined {
  return axes?.map((a, i) => {
    const values = a.values;
    if (i !== 1 || typeof values !== "function") return a;
    const recorded: uPlot.Axis.DynamicValues = (u, splits, axisIdx, space, incr) => {
      const out = values(u, splits, axisIdx, space, incr);
      el.dataset.yLabels = out.map((v) => String(v)).join("|");
      return out;
    };
    return { ...a, values: recorded };
  });
}

export function Chart({ testId, title, options, data, subscribe, countAttr, count = countPoints, height = 220 }: ChartProps) {
  const box = useRef<HTMLDivElement>(null);
  const theme = useTheme();
  const latest = useRef({ options, data, subscribe, count });
  latest.current = { options, data, subscribe, count };

  useEffect(() => {
    const el = box.current!;
    const build = (data: AlignedData) => {
      const options = latest.current.options(colors());
      return new uPlot(
        { ...options, axes: recordingLabels(options.axes, el), width: Math.max(200, el.clientWidth), height },
        data as uPlot.AlignedData,
        el,
      );
    };
    const initial = latest.current.data();
    el.setAttribute(countAttr, String(latest.current.count(initial)));
    let plot = build(initial);
    let frame = 0;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let lastAt = 0; // when the last redraw began (performance.now())
    let lastCost = 0; // what it cost, ms: copying the store's columns, setData and uPlot's draw
    let visible = true;
    const redraw = () => {
      frame = 0;
      const began = performance.now();
      lastAt = began;
      // uPlot draws in a microtask queued by setData: one queued after it ends after the draw
      queueMicrotask(() => (lastCost = performance.now() - began));
      const next = latest.current.data();
      if (next.length !== plot.series.length) {
        // A new series appeared (e.g. another rank): the options describe it, so rebuild.
        plot.destroy();
        plot = build(next);
      } else {
        plot.setData(next as uPlot.AlignedData);
      }
      el.setAttribute(countAttr, String(latest.current.count(next)));
    };
    // At most one redraw per frame, and a chart whose redraw cost c ms waits REDRAW_SPACING × c
    // after the last one began: a long series over many ranks redraws less often instead of
    // filling every frame (issue #33). A chart out of view redraws at most once a second.
    const request = () => {
      if (frame !== 0 || timer !== null) return;
      const wait = lastAt + Math.max(lastCost * REDRAW_SPACING, visible ? 0 : OFFSCREEN_MS) - performance.now();
      if (wait <= 0) frame = requestAnimationFrame(redraw);
      else
        timer = setTimeout(() => {
          timer = null;
          frame = requestAnimationFrame(redraw);
        }, wait);
    };
    const unsubscribe = latest.current.subscribe(request);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(200, el.clientWidth), height }));
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
      if (frame) cancelAnimationFrame(frame);
      plot.destroy();
    };
  }, [theme, height, countAttr]);

  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} data-testid={testId} class="chart-box" />
    </figure>
  );
}
