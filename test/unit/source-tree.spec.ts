/**
 * The house rules of the source tree (issue 26): one naming style for the
 * TypeScript files (kebab-case), the agent's Python modules in snake_case,
 * no two files of `src/` with the same name (`index` aside; the agent's
 * modules count), and no import circle between the modules of `src/`
 * (type-only and dynamic imports count, as they do for madge).
 */
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '..', '..');
const SRC = path.join(ROOT, 'src');
/** Written by `npm run build:agent`, not by hand. */
const GENERATED = path.join(SRC, '_generated');

/** Every file under `dir` (repository-relative, `/`-separated), `skip` left out. */
function filesUnder(dir: string, skip: ReadonlyArray<string> = []): string[] {
  const out: string[] = [];
  const walk = (at: string): void => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (skip.includes(full) || entry.name === '__pycache__') {
        continue;
      }
      if (entry.isDirectory()) {
        walk(full);
      } else if (entry.isFile()) {
        out.push(path.relative(ROOT, full).split(path.sep).join('/'));
      }
    }
  };
  walk(dir);
  return out.sort();
}

const isTypeScript = (file: string): boolean => /\.tsx?$/.test(file);
/** A file's name without its folder and last extension (`svg.d.ts` → `svg.d`). */
const stem = (file: string): string =>
  path.posix.basename(file).replace(/\.[^.]*$/, '');

/** `a-b-c.ts`, `a-b.spec.tsx`, `svg.d.ts`: lowercase words joined by `-`. */
const KEBAB = /^[a-z0-9]+(?:-[a-z0-9]+)*(?:\.spec|\.d)?\.tsx?$/;
/** `gpu_hygiene_agent`, `__init__.py`: lowercase words joined by `_`. */
const SNAKE = /^[a-z_][a-z0-9_]*$/;

/** The relative module specifiers of a TypeScript source: static, re-exported and dynamic imports. */
function relativeImports(source: string): string[] {
  const found: string[] = [];
  const patterns = [
    /(?:^|[\n;])\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]*)['"]/g,
    /\bimport\s*\(\s*['"](\.{1,2}\/[^'"]*)['"]\s*\)/g
  ];
  for (const pattern of patterns) {
    for (const match of source.matchAll(pattern)) {
      found.push(match[1]);
    }
  }
  return found;
}

/** The file a relative specifier of `from` names, among `files` (`.ts`, `.tsx`, a folder's `index`). */
function resolveImport(
  from: string,
  specifier: string,
  files: ReadonlySet<string>
): string | null {
  const base = path.posix.normalize(
    path.posix.join(path.posix.dirname(from), specifier)
  );
  const candidates = [
    base,
    `${base}.ts`,
    `${base}.tsx`,
    `${base}/index.ts`,
    `${base}/index.tsx`
  ];
  return candidates.find(c => files.has(c)) ?? null;
}

/** Each circle of a directed graph, as one of its strongly connected components of two or more nodes (Tarjan). */
function importCircles(
  graph: ReadonlyMap<string, ReadonlyArray<string>>
): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node)!, index.get(to)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) {
        circles.push(component.sort());
      }
    }
  };
  for (const node of graph.keys()) {
    if (!index.has(node)) {
      visit(node);
    }
  }
  return circles;
}

/** The import graph of the TypeScript modules of `src/` (generated code left out). */
function srcImportGraph(): Map<string, string[]> {
  const files = filesUnder(SRC, [GENERATED]).filter(isTypeScript);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const source = fs.readFileSync(path.join(ROOT, file), 'utf-8');
    const targets = relativeImports(source)
      .map(spec => resolveImport(file, spec, known))
      .filter((t): t is string => t !== null);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

describe('the source tree', () => {
  const src = filesUnder(SRC, [GENERATED]);
  const unit = filesUnder(path.join(ROOT, 'test', 'unit'));

  it('names every TypeScript file of src/ and test/unit/ in kebab-case', () => {
    const typescript = [...src, ...unit].filter(isTypeScript);
    expect(typescript.length).toBeGreaterThan(100);
    expect(typescript.filter(f => !KEBAB.test(path.posix.basename(f)))).toEqual(
      []
    );
  });

  it("names the agent's Python modules and packages in snake_case", () => {
    const agent = src.filter(f => f.startsWith('src/agent/'));
    const python = agent.filter(f => f.endsWith('.py'));
    expect(python.length).toBeGreaterThan(20);
    const names = new Set<string>();
    for (const file of python) {
      names.add(stem(file));
      path.posix
        .dirname(file)
        .split('/')
        .slice(2) // src/agent
        .forEach(folder => names.add(folder));
    }
    expect([...names].filter(n => !SNAKE.test(n))).toEqual([]);
  });

  it('gives no two files of src/ the same name, but index (the agent modules count)', () => {
    const byStem = new Map<string, string[]>();
    for (const file of src) {
      byStem.set(stem(file), [...(byStem.get(stem(file)) ?? []), file]);
    }
    // the agent's modules are in the count: a TS `graphs.ts` beside `graphs.py` would fail
    expect(byStem.get('graphs')).toEqual([
      'src/agent/gpu_hygiene_agent/graphs.py'
    ]);
    const repeated = [...byStem].filter(
      ([name, files]) => name !== 'index' && files.length > 1
    );
    expect(repeated).toEqual([]);
  });

  it('has no import circle between the modules of src/', () => {
    const graph = srcImportGraph();
    // the walk sees the imports: the plugin list imports the gauge, which imports its model
    expect(graph.get('src/index.ts')).toContain('src/statusbar/gauge.tsx');
    expect(graph.get('src/statusbar/gauge.tsx')).toContain(
      'src/statusbar/gauge-model.ts'
    );
    // a dynamic import is an edge too (the lazy schema chunk)
    expect(graph.get('src/server-kernels.ts')).toContain(
      'src/server-kernels-schema.ts'
    );
    expect(importCircles(graph)).toEqual([]);
  });
});

describe('importCircles', () => {
  it('finds a type-only circle, a self import and leaves a tree alone', () => {
    expect(
      importCircles(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', ['a.ts', 'd.ts']],
          ['d.ts', []],
          ['e.ts', ['e.ts']]
        ])
      )
    ).toEqual([['a.ts', 'b.ts', 'c.ts'], ['e.ts']]);
    expect(
      importCircles(
        new Map([
          ['a.ts', ['b.ts', 'c.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', []]
        ])
      )
    ).toEqual([]);
  });

  it('reads type-only, multi-line, re-exported and dynamic imports', () => {
    const source = [
      "import type { A } from './a';",
      'import {',
      '  B,',
      '  C',
      "} from '../b';",
      "export { D } from './d';",
      "import './side-effect';",
      "import React from 'react';",
      "const lazy = () => import('./lazy');"
    ].join('\n');
    expect(relativeImports(source).sort()).toEqual(
      ['../b', './a', './d', './lazy', './side-effect'].sort()
    );
  });
});
