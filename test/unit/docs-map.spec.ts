/**
 * The newcomer's documents against the tree (issue 26): docs/architecture.md's
 * map names every file of `src/` (the generated `src/_generated/` aside),
 * `jupyterlab_gpu_hygiene/`, `schema/`, `style/`, `scripts/` and `bench/`, and
 * every path it names exists; the README's first screen has `make lab`,
 * `make test` and one picture, and each of its feature sections is short.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '..', '..');
const ARCHITECTURE = path.join(ROOT, 'docs', 'architecture.md');
const README = path.join(ROOT, 'README.md');

/** The folders whose every file the map names, one line each. */
const MAPPED = [
  'src',
  'jupyterlab_gpu_hygiene',
  'schema',
  'style',
  'scripts',
  'bench'
];
/** Build outputs the map may name (git-ignored, absent from a fresh clone). */
const BUILD_OUTPUTS = [
  'src/_generated',
  'jupyterlab_gpu_hygiene/labextension',
  'jupyterlab_gpu_hygiene/_version.py'
];
/** The map lies between these markers. */
const MAP_START = '<!-- code-map:start -->';
const MAP_END = '<!-- code-map:end -->';

/**
 * Every file of the repository under `dir` (repository-relative,
 * `/`-separated): what git tracks, so build outputs, caches and a bench's
 * partial results (all git-ignored) never count.
 */
function filesUnder(dir: string): string[] {
  return execFileSync('git', ['ls-files', '-z', '--', dir], {
    cwd: ROOT,
    encoding: 'utf-8'
  })
    .split('\0')
    .filter(name => name !== '' && fs.existsSync(path.join(ROOT, name)))
    .sort();
}

/** The text of the map: what lies between its markers. */
function mapText(): string {
  const doc = fs.readFileSync(ARCHITECTURE, 'utf-8');
  const start = doc.indexOf(MAP_START);
  const end = doc.indexOf(MAP_END);
  expect(start).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start);
  return doc.slice(start + MAP_START.length, end);
}

/** The repository paths the map names in backticks (`src/model.ts`, `test/unit/`). */
function namedPaths(text: string): string[] {
  const roots = [...MAPPED, 'test', 'docs'].join('|');
  const pattern = new RegExp(`\`((?:${roots})/[^\`\\s]*)\``, 'g');
  return [...text.matchAll(pattern)].map(m => m[1]);
}

/**
 * The `###` sections under the README's `## Features`: heading and the
 * non-blank lines of its body.
 */
function featureSections(
  readme: string
): Array<{ heading: string; lines: string[] }> {
  const body = readme.split('\n## Features\n')[1]?.split('\n## ')[0] ?? '';
  return body
    .split('\n### ')
    .slice(1)
    .map(chunk => {
      const [heading, ...rest] = chunk.split('\n');
      return { heading, lines: rest.filter(line => line.trim() !== '') };
    });
}

describe('docs/architecture.md, the code map', () => {
  const named = namedPaths(mapText());
  const namedFiles = new Set(named.filter(p => !p.endsWith('/')));

  it.each(MAPPED)('names every file under %s/', dir => {
    const files = filesUnder(dir);
    expect(files.length).toBeGreaterThan(0);
    expect(files.filter(file => !namedFiles.has(file))).toEqual([]);
  });

  it('names only paths that exist', () => {
    expect(named.length).toBeGreaterThan(0);
    const missing = named.filter(p => {
      if (BUILD_OUTPUTS.some(out => p.startsWith(out))) {
        return false; // a build output, absent from a fresh tree
      }
      const full = path.join(ROOT, p);
      return p.endsWith('/')
        ? !fs.existsSync(full) || !fs.statSync(full).isDirectory()
        : !fs.existsSync(full) || !fs.statSync(full).isFile();
    });
    expect(missing).toEqual([]);
  });

  it('gives each file one line (no subject listed twice)', () => {
    const subjects = mapText()
      .split('\n')
      .map(line => /^- `([^`]+)`:/.exec(line)?.[1])
      .filter((s): s is string => s !== undefined);
    expect(subjects.length).toBeGreaterThan(0);
    const seen = new Set<string>();
    expect(subjects.filter(s => seen.size === seen.add(s).size)).toEqual([]);
  });
});

describe('README.md, for a newcomer', () => {
  const readme = fs.readFileSync(README, 'utf-8');

  it('opens with make lab, make test and one picture in its first 40 lines', () => {
    const first = readme.split('\n').slice(0, 40).join('\n');
    expect(first).toContain('make lab');
    expect(first).toContain('make test');
    expect(first.match(/!\[[^\]]*\]\([^)]+\)/g) ?? []).toHaveLength(1);
  });

  it('has feature sections of at most 6 lines each', () => {
    const sections = featureSections(readme);
    expect(sections.length).toBeGreaterThanOrEqual(10);
    const long = sections
      .filter(s => s.lines.length > 6)
      .map(s => `${s.heading} (${s.lines.length} lines)`);
    expect(long).toEqual([]);
  });

  it('keeps the markers scripts/compat.py rewrites', () => {
    const start = readme.indexOf('<!-- compat:kernel:start -->');
    const end = readme.indexOf('<!-- compat:kernel:end -->');
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
  });
});
