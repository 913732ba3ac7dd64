/** How a device's repeated stragglers read on the cluster page (DeviceOut.stragglers). */
import type { components } from "../api/schema";

export type DeviceStragglers = components["schemas"]["DeviceStragglers"];

/** The badge: "straggler 3× in 24 h" (null when the device had none in the window). */
export function stragglerBadge(s: DeviceStragglers | null | undefined): string | null {
  if (!s || s.count <= 0) return null;
  return `straggler ${s.count}× in ${s.hours} h`;
}

/** The badge's title, naming the jobs: "a rank on this device was a straggler in jobs #4, #7". */
export function stragglerTitle(s: DeviceStragglers): string {
  const jobs = s.jobs.map((id) => `#${id}`).join(", ");
  return `a rank on this device was a straggler in job${s.jobs.length === 1 ? "" : "s"} ${jobs} (last ${s.hours} h)`;
}
