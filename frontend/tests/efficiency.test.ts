import { describe, expect, it } from "vitest";
import { formatDeviceHours, formatRate, mfuText } from "../src/lib/efficiency";

describe("efficiency text", () => {
  it("keeps small device-hours readable", () => {
    expect(formatDeviceHours(0.004213)).toBe("0.0042");
    expect(formatDeviceHours(1.256)).toBe("1.26");
    expect(formatDeviceHours(310.4)).toBe("310");
    expect(formatDeviceHours(null)).toBe("—");
  });
  it("formats rates per device", () => {
    expect(formatRate(1234.56)).toBe("1,235 /s");
    expect(formatRate(12.34)).toBe("12.3 /s");
    expect(formatRate(undefined)).toBe("—");
  });
  it("says MFU against the peak, or why there is none", () => {
    expect(mfuText({ mfu: 0.4123, mfu_note: "bf16 peak" })).toBe("41.2% of bf16 peak");
    expect(mfuText({ mfu: 0.00123, mfu_note: "fp32 peak" })).toBe("0.12% of fp32 peak");
    expect(mfuText({ mfu: null, mfu_note: "none: CPU slots have no peak FLOPS to compare with" })).toBe(
      "none: CPU slots have no peak FLOPS to compare with",
    );
  });
});
