import { metricAxis } from "../src/lib/axes";
import { describe, expect, it } from "vitest";
import { restartIn, formatByteTicks, formatBytes, formatMetric, formatTick, isBytesMetric, tickLabels } from "../src/lib/format";

describe("byte metrics", () => {
  it("peak_mem and *_bytes are drawn in bytes, other metrics as numbers", () => {
    expect(isBytesMetric("peak_mem")).toBe(true);
    expect(isBytesMetric("activations_bytes")).toBe(true);
    expect(isBytesMetric("loss")).toBe(false);
    expect(isBytesMetric("peak_memory_ratio")).toBe(false);
  });

  it("formats an axis tick of a few hundred MB as MiB", () => {
    expect(formatBytes(350_000_000)).toBe("334 MiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(Number.NaN)).toBe("—");
  });
});

describe("axis ticks and table values", () => {
  it("ticks keep the digits their spacing needs", () => {
    expect([0, 0.00002, 0.00004].map((t) => formatTick(t, 0.00002))).toEqual(["0", "2e-5", "4e-5"]);
    expect([0.001, 0.0015, 0.002].map((t) => formatTick(t, 0.0005))).toEqual(["0.0010", "0.0015", "0.0020"]);
    expect(formatTick(0.30000000000000004, 0.1)).toBe("0.3");
    expect(formatTick(40000, 10000)).toBe("40,000");
    expect(formatTick(2.5e-5, 5e-6)).toBe("2.5e-5");
    expect(formatTick(3e9, 1e9)).toBe("3e+9");
  });

  it("table values: bytes for byte metrics, 4 significant digits or exponent otherwise", () => {
    expect(formatMetric("peak_mem", 352_700_000)).toBe("336 MiB");
    expect(formatMetric("loss", 1.2081)).toBe("1.208");
    expect(formatMetric("data_time", 3.332e-5)).toBe("3.332e-5");
    expect(formatMetric("samples_per_s", 26080)).toBe("2.608e+4");
    expect(formatMetric("loss", 0)).toBe("0.000");
    expect(formatMetric("loss", null)).toBe("—");
  });
});

describe("log-scale ticks", () => {
  it("a tick smaller than the spacing still shows its own digits", () => {
    expect([0.01, 0.1, 1, 10].map((t) => formatTick(t, 10))).toEqual(["0.01", "0.1", "1", "10"]);
  });
});

describe("restartIn", () => {
  const now = Date.parse("2026-11-25T10:00:00Z");
  it("counts down a restarting job's back-off", () => {
    expect(restartIn("restarting", "2026-11-25T10:00:07.2Z", now)).toBe("restarting in 8 s");
    expect(restartIn("restarting", "2026-11-25T09:59:59Z", now)).toBe("restarting now");
  });
  it("says nothing for other states or without a time", () => {
    expect(restartIn("running", "2026-11-25T10:00:07Z", now)).toBe("");
    expect(restartIn("restarting", null, now)).toBe("");
  });
});

describe("byte axis ticks", () => {
  it("never repeats a label on an idle device's axis", () => {
    const idle = formatByteTicks([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(idle).toEqual(["0 B", "", "", "", "", "1 B"]);
    expect(formatByteTicks([0, 256, 512, 768, 1024])).toEqual(["0.00 KiB", "0.25 KiB", "0.50 KiB", "0.75 KiB", "1.00 KiB"]);
    const gib = formatByteTicks([0, 2 ** 30, 2 * 2 ** 30, 3 * 2 ** 30]);
    expect(gib).toEqual(["0 GiB", "1 GiB", "2 GiB", "3 GiB"]);
    for (const labels of [idle, gib]) {
      const shown = labels.filter(Boolean);
      expect(new Set(shown).size).toBe(shown.length);
    }
  });
});

describe("log-scale tick labels", () => {
  // what uPlot's log10 filter hands `values` on a 0.01–10 axis with room for 1-2-5 labels
  const filtered = [0.01, 0.02, null, null, 0.05, null, null, null, null, 0.1, 0.2, null, null, 0.5, null, null, null, null, 1, 2, null, null, 5, null, null, null, null, 10];

  it("leaves the minor ticks uPlot filtered out unlabelled instead of drawing null", () => {
    const labels = tickLabels(filtered, (t) => formatTick(t, 0.01));
    expect(labels.filter((l) => l === "null" || l === "NaN")).toEqual([]);
    expect(labels.filter(Boolean)).toEqual(["0.01", "0.02", "0.05", "0.10", "0.20", "0.50", "1.00", "2.00", "5.00", "10.00"]);
    expect(labels[2]).toBe("");
  });

  it("applies to the metric axes of the job page and Compare, bytes too", () => {
    const values = metricAxis("loss", "loss").values as (...args: unknown[]) => string[];
    expect(values(null, [0.1, null, 1], 1, 50, 0.1)).toEqual(["0.1", "", "1.0"]);
    const log = metricAxis("loss", "loss", true).values as (...args: unknown[]) => string[];
    expect(log(null, [0.01, 0.05, null, 0.1, null, 1, 10, 100000], 1, 50, 0.01)).toEqual(["0.01", "0.05", "", "0.1", "", "1", "10", "100,000"]);
    const bytesLog = metricAxis("peak_mem", "peak_mem", true).values as (...args: unknown[]) => string[];
    expect(bytesLog(null, [1024, null, 1048576], 1, 50, 1)).toEqual(["1.0 KiB", "", "1.0 MiB"]);
    // linear: one unit for all ticks, the label names none (issue #33: "381.470 MiB" under "(bytes)")
    const bytes = metricAxis("peak_mem", "peak_mem");
    expect(bytes.label).toBe("peak_mem");
    expect((bytes.values as (...args: unknown[]) => string[])(null, [0, null, 524288, 1048576], 1, 50, 524288)).toEqual(["0.0 MiB", "", "0.5 MiB", "1.0 MiB"]);
  });
});
