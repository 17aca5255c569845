// Types of start-config.mjs, for test/start-demo.test.ts.
export function demoCollectorConfig(ports: { grpcPort: number; httpPort: number; keyFile: string }): string;
