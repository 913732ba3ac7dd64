/** A job's efficiency facts: device-hours, throughput per device, MFU (or why none). */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import { type Efficiency, formatDeviceHours, formatRate, mfuText } from "../lib/efficiency";

/** Fetched again whenever `version` changes (the job's state or step moved). */
export function EfficiencyFacts({ jobId, version }: { jobId: number; version: string }) {
  const [facts, setFacts] = useState<Efficiency | null>(null);
  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}/efficiency", { params: { path: { job_id: jobId } } })).then(setFacts, () => {});
  }, [jobId, version]);
  if (!facts) return null;
  return (
    <dl class="facts" data-testid="job-efficiency">
      <dt>Device-hours</dt>
      <dd data-testid="eff-device-hours" title={`${facts.devices} devices, ${facts.run_seconds.toFixed(0)} s run`}>
        {formatDeviceHours(facts.device_hours)}
        {facts.busy_device_hours != null && <span class="muted"> ({formatDeviceHours(facts.busy_device_hours)} busy)</span>}
      </dd>
      <dt>Samples/s per device</dt>
      <dd data-testid="eff-samples">{formatRate(facts.samples_per_s_per_device)}</dd>
      {facts.tokens_per_s_per_device != null && (
        <>
          <dt>Tokens/s per device</dt>
          <dd data-testid="eff-tokens">{formatRate(facts.tokens_per_s_per_device)}</dd>
        </>
      )}
      <dt>MFU</dt>
      <dd data-testid="eff-mfu" title={facts.device_names.join(", ")}>
        {mfuText(facts)}
      </dd>
    </dl>
  );
}
