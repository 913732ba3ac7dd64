import { describe, expect, it } from "vitest";
import { formatEnv, parseEnv } from "../src/lib/envVars";

describe("the submit form's env field", () => {
  it("reads NAME=value lines, keeping = and spaces in values", () => {
    const { env, problem } = parseEnv("NCCL_DEBUG=INFO\n\n# a comment\nMY_FLAGS=--a=1 --b\n");
    expect(problem).toBeNull();
    expect(env).toEqual({ NCCL_DEBUG: "INFO", MY_FLAGS: "--a=1 --b" });
    expect(parseEnv(formatEnv(env)).env).toEqual(env);
  });
  it("refuses what the server refuses, with its message", () => {
    // the server's words (workers/contract/user_env.py), as a 422 at env would show them
    expect(parseEnv("LD_PRELOAD=/x.so").problem).toBe(
      "variable 'LD_PRELOAD' is reserved: Trainboard, torchrun, the loader or the interpreter set or read it " +
        "(TRAINBOARD_*, RANK, MASTER_*, CUDA_VISIBLE_DEVICES, LD_*, PYTHON*, PATH, HOME, ...)",
    );
    expect(parseEnv("1BAD=x").problem).toBe("variable '1BAD' must be 1-128 letters, digits and _, not starting with a digit");
    expect(parseEnv("RANK=3").problem).toContain("variable 'RANK' is reserved");
    expect(parseEnv("A=1\nA=2").problem).toBe("variable 'A' is given twice");
    expect(parseEnv("JUSTANAME").problem).toBe("line 1: write NAME=value");
    expect(parseEnv(Array.from({ length: 65 }, (_, i) => `V${i}=x`).join("\n")).problem).toBe("at most 64 variables");
  });
});
