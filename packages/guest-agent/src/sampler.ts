// Runs every signal for one Report. A source that throws, hangs past the
// budget or fails is reported as failed and the rest go on.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { REPORT_SOURCES, ReportSchema, SourceState, SourceStatusSchema, type Report } from "@ws/protocol";
import type { Clock } from "./clock.js";
import { errorMessage, type Signal, type SignalContext, type SignalOutcome, type SourceName } from "./signals/types.js";

/** Report field each source fills. */
const REPORT_FIELD: Record<SourceName, keyof Report> = REPORT_SOURCES;

export interface Sample {
  /** Report without sequence/interval/sample age, which the sender fills. */
  report: Report;
  takenAtMonotonicMs: number;
}

const STATE: Record<SignalOutcome<unknown>["state"], SourceState> = {
  ok: SourceState.OK,
  absent: SourceState.ABSENT,
  failed: SourceState.FAILED,
};

/**
 * One source under its own deadline: at budgetMs it is reported failed ("timed out") and its
 * signal is aborted, so whatever it still waits for (an HTTP answer, a free lane for user-file
 * reads) is given up rather than piling up behind the next sample.
 */
async function collectWithin<T>(signal: Signal<T>, ctx: SignalContext, budgetMs: number): Promise<SignalOutcome<T>> {
  const own = new AbortController();
  const abortOwn = (): void => own.abort();
  ctx.signal.addEventListener("abort", abortOwn, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<SignalOutcome<T>>((resolve) => {
    timer = setTimeout(() => {
      own.abort();
      resolve({ state: "failed", message: `timed out after ${budgetMs} ms` });
    }, budgetMs);
  });
  try {
    const collected = Promise.resolve()
      .then(() => signal.collect({ ...ctx, signal: own.signal }))
      .catch((error: unknown) => ({ state: "failed" as const, message: errorMessage(error) }));
    return await Promise.race([collected, timeout]);
  } finally {
    clearTimeout(timer);
    ctx.signal.removeEventListener("abort", abortOwn);
  }
}

export async function takeSample(
  signals: Array<Signal<unknown>>,
  disabled: readonly string[],
  base: Omit<SignalContext, "signal">,
  budgetMs: number,
  clock: Clock,
): Promise<Sample> {
  const controller = new AbortController();
  // Every age in the Report is measured from the same instant, the one sample_age_seconds counts
  // from: a source that reads late (a slow Jupyter, a loaded machine) must not shift its ages.
  const sampledAtWallMs = clock.nowMs();
  const sampleClock: Clock = { nowMs: () => sampledAtWallMs, monotonicMs: () => clock.monotonicMs() };
  const ctx: SignalContext = { ...base, clock: sampleClock, signal: controller.signal };
  const report = create(ReportSchema, {});
  const sources: Array<MessageInitShape<typeof SourceStatusSchema>> = [];
  const started = clock.monotonicMs();
  const results = await Promise.all(
    signals.map(async (signal) => {
      if (disabled.includes(signal.name)) {
        return { signal, outcome: undefined, durationMs: 0 };
      }
      const begin = clock.monotonicMs();
      const outcome = await collectWithin(signal, ctx, budgetMs);
      return { signal, outcome, durationMs: clock.monotonicMs() - begin };
    }),
  );
  controller.abort();
  for (const { signal, outcome, durationMs } of results) {
    if (outcome === undefined) {
      sources.push({ source: signal.name, state: SourceState.DISABLED, message: "disabled in configuration" });
      continue;
    }
    sources.push({
      source: signal.name,
      state: STATE[outcome.state],
      message: outcome.state === "ok" ? (outcome.message ?? "") : outcome.message,
      durationSeconds: durationMs / 1000,
    });
    const value = outcome.state === "ok" ? outcome.value : outcome.state === "failed" ? outcome.value : undefined;
    if (value !== undefined) {
      const field = REPORT_FIELD[signal.name];
      // Each signal's value is the init shape of its own Report field's message.
      (report as unknown as Record<string, unknown>)[field] = createField(field, value);
    }
  }
  return {
    report: create(ReportSchema, { ...report, sources: sources.map((status) => create(SourceStatusSchema, status)) }),
    takenAtMonotonicMs: started,
  };
}

function createField(field: keyof Report, value: unknown): unknown {
  const desc = ReportSchema.fields.find((f) => f.localName === field);
  if (desc?.fieldKind !== "message") throw new Error(`Report has no message field ${String(field)}`);
  return create(desc.message, value as never);
}
