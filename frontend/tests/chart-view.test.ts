import { describe, expect, it } from "vitest";
import type uPlot from "uplot";
import { BYTE_INCREMENTS } from "../src/lib/axes";
import { curveSeries, DEFAULT_VIEW, faded, quantileRange, rangeProblem, withSmoothed, yRange } from "../src/lib/chartView";
import { formatByteTicks } from "../src/lib/format";
import { MetricStore, windowed, type AlignedData } from "../src/lib/series";

const plot = (data: (number | null)[][]) => ({ data }) as unknown as uPlot;

describe("chart view: y range and outlier clipping", () => {
  it("leaves the range to uPlot unless asked", () => {
    expect(yRange(DEFAULT_VIEW)).toBeUndefined();
  });

  it("clips a spike: the range covers the 1st-99th percentile, not the lr=0.3 blow-up", () => {
    const calm = Array.from({ length: 200 }, (_, i) => 1 + i / 200);
    const spiky = [...calm.slice(0, 199), 1e6];
    const range = yRange({ ...DEFAULT_VIEW, clip: true }) as uPlot.Range.Function;
    const [lo, hi] = range(plot([calm.map((_, i) => i), calm, spiky]), 1, 1e6, "y");
    expect(lo).toBeGreaterThan(0.9);
    expect(hi).toBeLessThan(2.1);
  });

  it("clips on the raw curves while smoothing: the smoothed spike runs off the chart too", () => {
    const calm = Array.from({ length: 200 }, (_, i) => 1 + i / 200);
    const spiky = [...calm.slice(0, 100), 1e6, ...calm.slice(101)];
    const view = { ...DEFAULT_VIEW, clip: true, weight: 0.9 };
    const [xs, ...cols] = withSmoothed([calm.map((_, i) => i), spiky], 0.9);
    const [, hi] = (yRange(view) as uPlot.Range.Function)(plot([xs, ...cols]), 1, 1e6, "y");
    expect(hi).toBeLessThan(2.1);
  });

  it("uses typed bounds, filling an open end from the data", () => {
    const range = yRange({ ...DEFAULT_VIEW, yMax: "3" }) as uPlot.Range.Function;
    expect(range(plot([[0, 1], [0.5, 9]]), 0.5, 9, "y")).toEqual([0.5, 3]);
  });

  it("refuses a range that cannot be drawn", () => {
    expect(rangeProblem({ ...DEFAULT_VIEW, yMin: "2", yMax: "1" })).toBe("y min must be below y max");
    expect(rangeProblem({ ...DEFAULT_VIEW, yMin: "abc" })).toBe("y min must be a number");
    expect(rangeProblem({ ...DEFAULT_VIEW, log: true, yMin: "0" })).toBe("a log scale needs positive bounds");
    expect(yRange({ ...DEFAULT_VIEW, yMin: "2", yMax: "1" })).toBeUndefined();
  });

  it("quantiles skip gaps, and non-positive values on a log scale", () => {
    expect(quantileRange([[null, 3, -1, 2]], 0, true)).toEqual([2, 3]);
    expect(quantileRange([[null]], 0.01)).toBeNull();
  });
});

describe("chart view: smoothing keeps the raw curves", () => {
  it("draws raw then smoothed columns, raw faint", () => {
    const data: AlignedData = [[0, 1, 2], [1, 3, 5]];
    expect(withSmoothed(data, 0)).toBe(data);
    const both = withSmoothed(data, 0.5);
    expect(both).toEqual([[0, 1, 2], [1, 3, 5], [1, 2, 3.5]]);
    const series = curveSeries(["rank 0"], ["#2f6fdb"], 0.5, "loss");
    expect(series.map((s) => s.label)).toEqual(["rank 0 (raw)", "rank 0"]);
    expect(series[0]!.stroke).toBe(faded("#2f6fdb", 0.3));
    expect(faded("#2f6fdb", 0.3)).toBe("#2f6fdb4d");
  });
});

describe("metric store: x by step, wall time or relative time", () => {
  it("maps each step to its time, and relative time to seconds since the first point", () => {
    const store = new MetricStore();
    store.applyPoints([
      { attempt_id: 1, rank: 0, step: 1, name: "loss", value: 3, time: 1000 },
      { attempt_id: 1, rank: 1, step: 1, name: "loss", value: 4, time: 1000.5 },
      { attempt_id: 1, rank: 0, step: 2, name: "loss", value: 2, time: 1010 },
    ]);
    expect(store.data("loss")).toEqual([[1, 2], [3, 2], [4, null]]);
    expect(store.data("loss", "wall")).toEqual([[1000, 1010], [3, 2], [4, null]]);
    expect(store.firstTime).toBe(1000);
    expect(store.data("loss", "relative", store.firstTime!)).toEqual([[0, 10], [3, 2], [4, null]]);
  });
});

describe("device charts draw the job's own time", () => {
  it("keeps the samples from the job's start to its end", () => {
    const data: AlignedData = [[10, 20, 30, 40], [1, 2, 3, 4], [5, 6, 7, 8]];
    expect(windowed(data, 20, 30)).toEqual([[20, 30], [2, 3], [6, 7]]);
    expect(windowed(data, null)).toBe(data);
    expect(windowed(data, 50)).toEqual([[], [], []]);
  });
});

describe("byte axes", () => {
  it("tick at whole binary units: no 381.470 MiB", () => {
    const mib = 1024 ** 2;
    expect(BYTE_INCREMENTS).toContain(128 * mib);
    expect(formatByteTicks([0, 128 * mib, 256 * mib, 384 * mib])).toEqual(["0 MiB", "128 MiB", "256 MiB", "384 MiB"]);
  });
});
