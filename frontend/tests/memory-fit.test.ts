import { describe, expect, it } from "vitest";
import { fitNote, memoryText } from "../src/views/submit/MemoryFit";

describe("a device's memory in the estimate", () => {
  it("reads a CPU slot's need from the server's fields, in the host's shared RAM", () => {
    const slot = { memory_shared: true, ranks: 2, need: 3 * 2 ** 20, memory_total: 64 * 2 ** 30 };
    expect(fitNote(slot)).toBe("3.0 MiB for 2 ranks in the host's RAM");
    expect(fitNote({ ...slot, ranks: 1 })).toBe("3.0 MiB for 1 rank in the host's RAM");
    expect(memoryText(slot)).toBe("64.0 GiB host RAM, shared by the node's CPU slots");
  });

  it("reads a GPU's memory as its own", () => {
    const gpu = { memory_shared: false, ranks: 1, need: 2 * 2 ** 30, memory_total: 80 * 2 ** 30 };
    expect(fitNote(gpu)).toBe("2.0 GiB of 80.0 GiB");
    expect(memoryText(gpu)).toBe("80.0 GiB");
  });
});
