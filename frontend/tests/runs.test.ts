import { describe, expect, it } from "vitest";
import { DEFAULT_RUNS, runsFromQuery, runsToQuery, toggleSort } from "../src/lib/runs";

describe("the run table's address", () => {
  it("round-trips what differs from the defaults", () => {
    const q = { ...DEFAULT_RUNS, columns: ["hyperparameters.lr", "hyperparameters.seed"], group: "hyperparameters.lr", sort: "final:loss", page: 2 };
    const text = runsToQuery(q);
    expect(text).toBe("?columns=hyperparameters.lr%2Chyperparameters.seed&sort=final%3Aloss&group=hyperparameters.lr&page=2");
    expect(runsFromQuery(text)).toEqual(q);
  });
  it("gives the defaults for a plain /runs and an empty list when asked for none", () => {
    expect(runsToQuery(DEFAULT_RUNS)).toBe("");
    expect(runsFromQuery("")).toEqual(DEFAULT_RUNS);
    expect(runsFromQuery("?metrics=").metrics).toEqual([]);
    expect(runsFromQuery("?page=-3").page).toBe(0);
  });
  it("toggles a column's sort between ascending and descending", () => {
    expect(toggleSort("-id", "final:loss")).toBe("final:loss");
    expect(toggleSort("final:loss", "final:loss")).toBe("-final:loss");
    expect(toggleSort("-final:loss", "final:loss")).toBe("final:loss");
  });
});
