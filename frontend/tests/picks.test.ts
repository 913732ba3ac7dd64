import { describe, expect, it } from "vitest";
import { nextPicks } from "../src/lib/picks";

describe("ticking runs to compare", () => {
  const ten = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

  it("refuses an 11th run instead of unticking the first", () => {
    expect(nextPicks(ten, 11, true, 10)).toBeNull();
    expect(nextPicks(ten.slice(0, 9), 11, true, 10)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 11]);
  });

  it("unticks, and a repeated tick changes nothing", () => {
    expect(nextPicks(ten, 1, false, 10)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(nextPicks(ten, 10, true, 10)).toEqual(ten);
  });
});
