// whatif's reads from Prometheus: which VMs the range recorded (/api/v1/series), then their histories
// a batch of VMs at a time, one range query per chunk of steps. A week of a whole fleet in one query
// is refused by Prometheus (--query.max-samples, 50 M by default: about 300 VMs at a one-minute step)
// and, past about 150 VMs, longer than the longest string V8 makes; a batch at a time stays under
// both and keeps in memory only the VMs being replayed. The only I/O of whatif's history.
import { errorMessage } from "@ws/protocol";
import {
  batchHistoryQuery,
  HistoryError,
  HISTORY_METRICS,
  historyFromSeries,
  type MatrixSeries,
  parseLabelSets,
  parseMatrix,
  promString,
  rangeChunks,
  recordedVms,
  type RecordedVm,
  type StepGrid,
  type VmHistory,
  vmBatches,
} from "./history.js";
import { HOST_QUERY_NAMES, hostHistoryQueries, type HostSteps, hostSteps, withHostSteps } from "./host-history.js";
import type { HostQueryName } from "../../loop/hostside/queries.js";

const QUERY_TIMEOUT_MS = 120_000;

export interface PrometheusSource {
  prometheusUrl: URL;
  /** Extra HTTP headers (--header 'Authorization: Bearer …'). */
  headers: Record<string, string>;
  stepSeconds: number;
  fetch: typeof fetch;
}

/** A POST to Prometheus's HTTP API, its JSON answer; every failure a HistoryError that says what happened. */
async function prometheusApi(source: PrometheusSource, path: string, body: URLSearchParams): Promise<unknown> {
  const base = source.prometheusUrl.href.endsWith("/")
    ? source.prometheusUrl
    : new URL(`${source.prometheusUrl.href}/`);
  const url = new URL(path, base);
  let response: Response;
  try {
    response = await source.fetch(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json", ...source.headers },
      body,
      signal: AbortSignal.timeout(QUERY_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new HistoryError(
      `cannot reach Prometheus at ${source.prometheusUrl.href}: ${cause?.code ?? cause?.message ?? errorMessage(error)}`,
    );
  }
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new HistoryError(
      `Prometheus at ${url.href} answered HTTP ${response.status} with something that is not JSON: ${text.slice(0, 200)}`,
    );
  }
}

export async function queryRange(
  source: PrometheusSource,
  query: string,
  startMs: number,
  endMs: number,
): Promise<MatrixSeries[]> {
  const body = new URLSearchParams({
    query,
    start: String(startMs / 1000),
    end: String(endMs / 1000),
    step: `${source.stepSeconds}s`,
  });
  return parseMatrix(await prometheusApi(source, "api/v1/query_range", body));
}

/** The VMs with replayable series in the range, sorted as the report lists them. */
export async function listRecordedVms(
  source: PrometheusSource,
  grid: StepGrid,
  filter: { namespace?: string; vm?: string },
): Promise<RecordedVm[]> {
  // --vm is matched below, as older recordings name the VM by `vm` where newer ones say `name`.
  const namespace = filter.namespace !== undefined ? `,namespace=${promString(filter.namespace)}` : "";
  const body = new URLSearchParams({
    "match[]": `{__name__=~"workstation_(${HISTORY_METRICS.join("|")})"${namespace}}`,
    start: String(grid.startMs / 1000),
    end: String((grid.startMs + (grid.count - 1) * grid.stepMs) / 1000),
  });
  return recordedVms(parseLabelSets(await prometheusApi(source, "api/v1/series", body)), filter);
}

/**
 * --host-window: KubeVirt's per-VM series over the range, with the live source's own queries, read
 * once and folded into each step's round (the batches of VMs then take their own readings from it).
 */
export async function hostHistory(source: PrometheusSource, grid: StepGrid, windowSeconds: number): Promise<HostSteps> {
  const queries = hostHistoryQueries(windowSeconds);
  const answers = Object.fromEntries(HOST_QUERY_NAMES.map((name) => [name, [] as MatrixSeries[]])) as Record<
    HostQueryName,
    MatrixSeries[]
  >;
  for (const name of HOST_QUERY_NAMES)
    for (const chunk of rangeChunks(grid))
      answers[name].push(...(await queryRange(source, queries[name], chunk.startMs, chunk.endMs)));
  return hostSteps(answers, grid, windowSeconds);
}

/**
 * The VMs' histories, `perQuery` VMs at a time (one range query per chunk of steps each), with the
 * host-side readings when given. Each batch is read when the one before it is taken.
 */
export async function* historyBatches(
  source: PrometheusSource,
  vms: readonly RecordedVm[],
  grid: StepGrid,
  perQuery: number,
  host?: HostSteps,
): AsyncGenerator<VmHistory[]> {
  for (const batch of vmBatches(vms, perQuery)) {
    const series: MatrixSeries[] = [];
    for (const chunk of rangeChunks(grid))
      series.push(...(await queryRange(source, batchHistoryQuery(batch), chunk.startMs, chunk.endMs)));
    const histories = historyFromSeries(series, grid);
    yield host ? withHostSteps(histories, host) : histories;
  }
}
