/** The memory a template job will need per device, beside each node's device memory. */
import { useEffect, useState } from "preact/hooks";
import { ApiError, client, ok } from "../../api/http";
import type { JobSpec } from "../../api/types";
import type { MemoryEstimate } from "../../lib/efficiency";
import { cleanMessage, dottedField } from "../../lib/errors";
import { formatBytes } from "../../lib/format";
import { TableHead } from "../../components/bits";

/** ": <field>: <message>" of a 422's first issue, else nothing. */
function firstIssue(err: unknown): string {
  if (!(err instanceof ApiError) || !Array.isArray(err.detail) || !err.detail.length) return "";
  const issue = err.detail[0] as { loc?: (string | number)[]; msg?: string };
  return `: ${dottedField(issue.loc ?? [])}: ${cleanMessage(issue.msg ?? "")}`;
}

/** POST /api/estimate/memory for the form's spec, a moment after the last change. */
function useEstimate(spec: Record<string, unknown> | null): { estimate: MemoryEstimate | null; problem: string | null } {
  const [estimate, setEstimate] = useState<MemoryEstimate | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const key = spec ? JSON.stringify(spec) : "";
  useEffect(() => {
    if (!spec) return;
    let current = true;
    const timer = setTimeout(() => {
      // the name is no part of the estimate: an unnamed draft is estimated too
      const body = { ...spec, name: String(spec.name ?? "").trim() || "estimate" } as unknown as JobSpec;
      ok(client.POST("/api/estimate/memory", { body })).then(
        (found) => current && (setEstimate(found), setProblem(null)),
        (err: unknown) => current && (setEstimate(null), setProblem(`no estimate until the spec is valid${firstIssue(err)}`)),
      );
    }, 400);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [key]);
  return { estimate, problem };
}

export function MemoryFit({ spec }: { spec: Record<string, unknown> | null }) {
  const { estimate, problem } = useEstimate(spec);
  if (!spec) return null;
  if (!estimate) return <p class="muted small" data-testid="memory-estimate-pending">Memory per device: {problem ?? "estimating…"}</p>;
  const parts: [string, number][] = [
    ["parameters", estimate.parameters],
    ["gradients", estimate.gradients],
    ["optimizer state", estimate.optimizer_state],
    ["activations", estimate.activations],
    ["CUDA runtime", estimate.runtime],
  ];
  return (
    <div class="implications" data-testid="memory-estimate" aria-live="polite">
      <p>
        Memory per device: <strong data-testid="memory-total">{formatBytes(estimate.total)}</strong>{" "}
        <span class="muted">
          ({estimate.parameter_count.toLocaleString("en-US")} parameters; {parts.map(([n, b]) => `${n} ${formatBytes(b)}`).join(", ")}; {estimate.note})
        </span>
      </p>
      {estimate.devices.length > 0 && (
        <table class="memory-fit" data-testid="memory-fit">
          <TableHead columns={["Node", "Device", "Memory", "Fits"]} />
          <tbody>
            {estimate.devices.map((d) => (
              <tr data-testid={`memory-fit-${d.node}-${d.index}`} data-fits={String(d.fits)}>
                <td>{d.node}</td>
                <td>
                  {d.index}: {d.name}
                </td>
                <td>{formatBytes(d.memory_total)}</td>
                <td class={d.fits === false ? "problem" : undefined}>
                  {d.fits === null ? "unknown" : d.fits ? "yes" : "no"} <span class="muted">({d.note})</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {estimate.warnings.map((w) => (
        <p class="warning" data-testid="memory-warning">
          {w}
        </p>
      ))}
    </div>
  );
}
