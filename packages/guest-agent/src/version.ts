/** Replaced at bundle time by esbuild's define; "dev" when run from source. */
declare const __WS_VERSION__: string | undefined;
export const AGENT_VERSION: string = typeof __WS_VERSION__ === "string" ? __WS_VERSION__ : "0.1.0-dev";
