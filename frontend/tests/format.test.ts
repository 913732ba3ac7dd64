import { describe, expect, it } from "vitest";
import { formatBytes, isBytesMetric } from "../src/lib/format";

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
