declare const __WS_VERSION__: string | undefined;
export const COLLECTOR_VERSION: string = typeof __WS_VERSION__ === "string" ? __WS_VERSION__ : "0.1.0-dev";
