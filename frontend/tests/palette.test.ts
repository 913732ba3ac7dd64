import { describe, expect, it } from "vitest";
import { deltaE, lab, PALETTE, runColor } from "../src/lib/palette";

describe("the run palette", () => {
  for (const theme of ["light", "dark"] as const) {
    it(`keeps 20 runs distinct on the ${theme} theme`, () => {
      const colours = Array.from({ length: 20 }, (_, i) => runColor(i, theme));
      expect(new Set(colours).size).toBe(20);
      let smallest = Infinity;
      for (let i = 0; i < 20; i++) for (let j = i + 1; j < 20; j++) smallest = Math.min(smallest, deltaE(colours[i]!, colours[j]!));
      expect(smallest).toBeGreaterThan(20); // two blues or two oranges are about 10 apart
      const lightness = colours.map((c) => lab(c)[0]);
      if (theme === "light") expect(Math.max(...lightness)).toBeLessThan(75);
      else expect(Math.min(...lightness)).toBeGreaterThan(50);
    });
  }
  it("starts with the theme's eight series colours and repeats only after 20", () => {
    expect(PALETTE.light.slice(0, 2)).toEqual(["#2f6fdb", "#d9480f"]);
    expect(runColor(20, "dark")).toBe(runColor(0, "dark"));
  });
});
