import { describe, expect, it } from "vitest";
import { stragglerBadge, stragglerTitle } from "../src/lib/stragglers";

describe("device straggler badge", () => {
  it("counts the events of the window", () => {
    expect(stragglerBadge({ count: 3, hours: 24, jobs: [4, 7] })).toBe("straggler 3× in 24 h");
    expect(stragglerBadge({ count: 1, hours: 24, jobs: [4] })).toBe("straggler 1× in 24 h");
  });
  it("shows nothing for a device without stragglers", () => {
    expect(stragglerBadge(null)).toBeNull();
    expect(stragglerBadge(undefined)).toBeNull();
    expect(stragglerBadge({ count: 0, hours: 24, jobs: [] })).toBeNull();
  });
  it("names the jobs in its title", () => {
    expect(stragglerTitle({ count: 3, hours: 24, jobs: [4, 7] })).toBe(
      "a rank on this device was a straggler in jobs #4, #7 (last 24 h)",
    );
    expect(stragglerTitle({ count: 2, hours: 24, jobs: [4] })).toBe(
      "a rank on this device was a straggler in job #4 (last 24 h)",
    );
  });
});
