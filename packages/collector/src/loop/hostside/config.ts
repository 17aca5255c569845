// The `hostSide:` section of the collector's config file (docs/kubernetes.md,
// "Host-side evidence"). Absent: no host-side evidence, and nothing changes.
//
//   hostSide:
//     prometheus:
//       url: https://prometheus-k8s.monitoring.svc:9091
//       bearerTokenFile: /var/run/secrets/ws-prometheus/token
//       caFile: /var/run/secrets/ws-prometheus/ca.crt
//       timeout: 10s
//       maxResponseBytes: 16777216
//     interval: 1m
//     window: 2m
//     labels: { namespace: namespace, name: name, vmi: vmi }
//     connectionsWitness: kubevirt_virt_api_ready_status
import { DurationError, isJsonObject, type JsonObject, parseDuration } from "@ws/protocol";
import { DEFAULT_CONNECTIONS_WITNESS, DEFAULT_HOST_LABELS, type HostLabels } from "./queries.js";

export interface HostSideConfig {
  prometheus: {
    url: string;
    bearerTokenFile?: string;
    caFile?: string;
    timeoutMs: number;
    maxResponseBytes: number;
  };
  intervalSeconds: number;
  windowSeconds: number;
  labels: HostLabels;
  connectionsWitness: string;
}

const KEYS = ["prometheus", "interval", "window", "labels", "connectionsWitness"];
const PROMETHEUS_KEYS = ["url", "bearerTokenFile", "caFile", "timeout", "maxResponseBytes"];
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

export function parseHostSideConfig(value: unknown, problems: string[], label: string): HostSideConfig | undefined {
  if (value == null) return undefined;
  if (!isJsonObject(value)) {
    problems.push(`${label} must be a mapping`);
    return undefined;
  }
  const unknown = (obj: JsonObject, keys: string[], where: string) => {
    for (const key of Object.keys(obj))
      if (!keys.includes(key)) problems.push(`${where}: unknown setting "${key}" (known: ${keys.join(", ")})`);
  };
  unknown(value, KEYS, label);
  const seconds = (raw: unknown, where: string, fallback: number): number => {
    if (raw == null) return fallback;
    try {
      return parseDuration(String(raw), { allowBareSeconds: true });
    } catch (error) {
      problems.push(`${where}: ${error instanceof DurationError ? error.message : String(error)}`);
      return fallback;
    }
  };
  const text = (raw: unknown, where: string): string | undefined => {
    if (raw == null) return undefined;
    if (typeof raw === "string" && raw.trim() !== "") return raw.trim();
    problems.push(`${where}: expected a non-empty string`);
    return undefined;
  };
  const prometheus = isJsonObject(value.prometheus) ? value.prometheus : {};
  if (!isJsonObject(value.prometheus)) problems.push(`${label}.prometheus: a mapping with at least url is required`);
  unknown(prometheus, PROMETHEUS_KEYS, `${label}.prometheus`);
  const url = text(prometheus.url, `${label}.prometheus.url`) ?? "";
  if (url === "") problems.push(`${label}.prometheus.url is required (Prometheus' base URL)`);
  else if (!/^https?:\/\/[^/@\s]+/.test(url))
    problems.push(`${label}.prometheus.url: "${url}" must be http(s)://host[:port][/prefix], without credentials`);
  const timeoutMs = seconds(prometheus.timeout, `${label}.prometheus.timeout`, 10) * 1000;
  const maxBytes = prometheus.maxResponseBytes ?? 16 * 1024 * 1024;
  if (typeof maxBytes !== "number" || !Number.isInteger(maxBytes) || maxBytes < 1024 || maxBytes > 1024 ** 3)
    problems.push(`${label}.prometheus.maxResponseBytes: expected a whole number of bytes from 1024 to 1GiB`);
  const intervalSeconds = seconds(value.interval, `${label}.interval`, 60);
  const windowSeconds = seconds(value.window, `${label}.window`, 120);
  if (windowSeconds < intervalSeconds)
    problems.push(
      `${label}.window (${windowSeconds}s) must be at least interval (${intervalSeconds}s): each round's window must reach back to the previous round, or the readings have gaps`,
    );
  if (timeoutMs >= intervalSeconds * 1000)
    problems.push(
      `${label}.prometheus.timeout (${timeoutMs / 1000}s) must be shorter than interval (${intervalSeconds}s)`,
    );
  const labels: HostLabels = { ...DEFAULT_HOST_LABELS };
  if (value.labels != null) {
    if (!isJsonObject(value.labels)) problems.push(`${label}.labels must be a mapping`);
    else {
      unknown(value.labels, Object.keys(DEFAULT_HOST_LABELS), `${label}.labels`);
      for (const key of Object.keys(DEFAULT_HOST_LABELS) as Array<keyof HostLabels>) {
        const name = value.labels[key];
        if (name == null) continue;
        if (typeof name !== "string" || !LABEL_NAME.test(name))
          problems.push(`${label}.labels.${key}: ${JSON.stringify(name)} is not a Prometheus label name`);
        else labels[key] = name;
      }
    }
  }
  const witness = value.connectionsWitness ?? DEFAULT_CONNECTIONS_WITNESS;
  if (typeof witness !== "string" || (witness !== "" && !METRIC_NAME.test(witness)))
    problems.push(`${label}.connectionsWitness: a metric name, or "" to trust absent connection gauges`);
  const caFile = text(prometheus.caFile, `${label}.prometheus.caFile`);
  const bearerTokenFile = text(prometheus.bearerTokenFile, `${label}.prometheus.bearerTokenFile`);
  return {
    prometheus: {
      url,
      ...(bearerTokenFile ? { bearerTokenFile } : {}),
      ...(caFile ? { caFile } : {}),
      timeoutMs,
      maxResponseBytes: typeof maxBytes === "number" ? maxBytes : 16 * 1024 * 1024,
    },
    intervalSeconds,
    windowSeconds,
    labels,
    connectionsWitness: typeof witness === "string" ? witness : DEFAULT_CONNECTIONS_WITNESS,
  };
}
