// Records what the engine sees, live, into the trace format, so a real week
// can be replayed under other thresholds. Append-only, one JSON object per
// line, written in order. Recording never throws into the collector: a write
// error is reported through onError and the lines are dropped.
//
// Appending to an existing trace (a collector restart) continues its time
// axis: the origin is recovered from the last line's "at" and "t".

import { open, appendFile } from "node:fs/promises";
import type { Report } from "@ws/protocol";
import { formatTraceLine, parseTraceLine, type TraceHostReading, type TracePayload } from "./trace.js";

export type TraceInput =
  | { atMs: number; vm: string; report: Report }
  | { atMs: number; vm: string; event: "agent-connected" | "agent-disconnected"; goodbye?: string }
  | { atMs: number; vm: string; policy: Record<string, string> }
  | { atMs: number; vm: string; host: TraceHostReading };

export interface TraceRecorderOptions {
  onError?: (error: Error) => void;
  /** Lines held in memory while the disk is slow; beyond this they are dropped (and counted). */
  maxQueuedLines?: number;
}

const TAIL_BYTES = 256 * 1024;

/** The origin (ms) that makes the existing trace's last line keep its t; undefined for a new or empty file. */
export async function traceOriginFromFile(
  path: string,
): Promise<{ originMs: number; lastT: number } | { lastT: number } | undefined> {
  let handle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return undefined;
    const length = Math.min(size, TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    await handle.read(buffer, 0, length, size - length);
    const lines = buffer
      .toString("utf8")
      .split("\n")
      .filter((line) => line.trim() !== "" && !line.startsWith("#"));
    let lastT: number | undefined;
    for (let index = lines.length - 1; index >= 0; index--) {
      const event = parseTraceLine(lines[index]!, 0);
      if (typeof event === "string") continue;
      lastT ??= event.t;
      if (event.at !== undefined) return { originMs: Date.parse(event.at) - event.t * 1000, lastT };
    }
    return lastT === undefined ? undefined : { lastT };
  } finally {
    await handle.close();
  }
}

export class TraceRecorder {
  private originMs: number | undefined;
  private ready: Promise<void> | undefined;
  private pending: TraceInput[] = [];
  private drainScheduled = false;
  private writing: Promise<void> = Promise.resolve();
  private droppedLines = 0;
  private readonly maxQueued: number;

  constructor(
    readonly path: string,
    private readonly options: TraceRecorderOptions = {},
  ) {
    this.maxQueued = options.maxQueuedLines ?? 100_000;
  }

  /** Lines dropped because the queue was full or a write failed. */
  get dropped(): number {
    return this.droppedLines;
  }

  record(input: TraceInput): void {
    this.ready ??= this.findOrigin(input.atMs);
    if (this.pending.length >= this.maxQueued) {
      this.droppedLines++;
      return;
    }
    this.pending.push(input);
    if (!this.drainScheduled) {
      this.drainScheduled = true;
      this.writing = this.writing.then(() => this.drain());
    }
  }

  /** Resolves when everything recorded so far is on disk (or dropped after an error). */
  async flush(): Promise<void> {
    await this.writing;
  }

  async close(): Promise<void> {
    await this.flush();
  }

  private async findOrigin(firstAtMs: number): Promise<void> {
    try {
      const existing = await traceOriginFromFile(this.path);
      if (existing === undefined) this.originMs = firstAtMs;
      else if ("originMs" in existing) this.originMs = existing.originMs;
      // No wall times in the file: continue right after its last t.
      else this.originMs = firstAtMs - existing.lastT * 1000;
    } catch (error) {
      this.originMs = firstAtMs;
      this.options.onError?.(error as Error);
    }
  }

  private format(input: TraceInput): string {
    const payload: TracePayload =
      "report" in input
        ? { report: input.report }
        : "event" in input
          ? { event: input.event, ...(input.goodbye === undefined ? {} : { goodbye: input.goodbye }) }
          : "host" in input
            ? { host: input.host }
            : { policy: input.policy };
    const t = Math.max(0, (input.atMs - (this.originMs ?? input.atMs)) / 1000);
    return formatTraceLine(t, input.vm, payload, input.atMs);
  }

  private async drain(): Promise<void> {
    await this.ready;
    // Inputs recorded from here on go to the next batch, written after this one.
    this.drainScheduled = false;
    const batch = this.pending;
    this.pending = [];
    if (batch.length === 0) return;
    try {
      await appendFile(this.path, `${batch.map((input) => this.format(input)).join("\n")}\n`, "utf8");
    } catch (error) {
      this.droppedLines += batch.length;
      this.options.onError?.(error as Error);
    }
  }
}
