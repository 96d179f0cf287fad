// Types for scripts/layering.mjs, which test/layering.test.ts imports.
export declare const DEPENDENCY_RULE: Record<string, string[]>;
export declare const TOP_FILES: string[];
export declare function floors(rule?: Record<string, string[]>): Map<string, number>;
export declare function render(rule?: Record<string, string[]>): string;
export declare const DOC: string;
export declare function docBlock(text?: string): string;
