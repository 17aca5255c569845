// Replay: the engine over a recorded trace, with a virtual clock.
export {
  parseTrace,
  parseTraceLine,
  formatTraceLine,
  TraceError,
  type TraceEvent,
  type TracePayload,
} from "./trace.js";
export { replayTrace, summarizeTimeline, traceOriginMs, type ReplayOptions, type TimelineEntry } from "./replay.js";
export { formatTimelineText, formatTimelineJson, formatOffset } from "./format.js";
export { replayCommand, policyConfigFromFile, REPLAY_HELP, type ReplayIo } from "./command.js";
export { TraceRecorder, traceOriginFromFile, type TraceInput, type TraceRecorderOptions } from "./recorder.js";
