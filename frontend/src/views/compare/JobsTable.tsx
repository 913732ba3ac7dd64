/** The compared jobs, one row each in their curve colour: state, progress, update mode, owner, efficiency. */
import type { Comparison } from "../../api/types";
import { StateBadge, TableHead } from "../../components/bits";
import { type Efficiency, formatDeviceHours, formatRate, mfuText } from "../../lib/efficiency";
import { runColor } from "../../lib/palette";
import { updateModeText } from "../../lib/updateMode";
import { Link } from "../../router";

function EfficiencyCells({ efficiency, jobId }: { efficiency: Efficiency | undefined; jobId: number }) {
  if (!efficiency) return <td colSpan={3} class="muted">—</td>;
  return (
    <>
      <td data-testid={`compare-device-hours-${jobId}`}>{formatDeviceHours(efficiency.device_hours)}</td>
      <td data-testid={`compare-samples-${jobId}`}>{formatRate(efficiency.samples_per_s_per_device)}</td>
      <td data-testid={`compare-mfu-${jobId}`}>{mfuText(efficiency)}</td>
    </>
  );
}

export function JobsTable({ comparison, theme }: { comparison: Comparison; theme: "light" | "dark" }) {
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label="Compared jobs">
    <table class="compare-jobs">
      <TableHead
        columns={[
          "Job", "State", "Steps", "Update mode", "Owner", "Device-hours", "Samples/s per device", "MFU"
        ]}
      />
      <tbody>
        {comparison.jobs.map((job, i) => (
          <tr>
            <td>
              <span class="swatch" style={{ background: runColor(i, theme) }} />
              <Link href={`/jobs/${job.id}`} data-testid={`compare-job-${job.id}`}>
                #{job.id} {job.name}
              </Link>
            </td>
            <td>
              <StateBadge state={job.state} />
            </td>
            <td>
              {job.step}/{job.total_steps ?? "?"}
            </td>
            <td data-testid={`compare-update-${job.id}`}>{updateModeText(job.spec)}</td>
            <td>{job.owner}</td>
            <EfficiencyCells efficiency={comparison.efficiency[String(job.id)]} jobId={job.id} />
          </tr>
        ))}
      </tbody>
    </table>
    </div>
  );
}
