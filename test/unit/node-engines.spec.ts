/**
 * The Node the README asks for is one every locked package accepts (issue 29,
 * item 7): `@axe-core/playwright` 4.14 asked for Node >= 22.12 while the README
 * said Node 20, and `npm ci` only warned. package.json's `engines.node` and the
 * README's "Node N" name the same major, every package in package-lock.json
 * whose `engines.node` is set admits that Node's oldest release, and `.npmrc`
 * turns npm's warning into an error.
 */
import * as fs from 'fs';
import * as path from 'path';
import semver from 'semver';

const ROOT = path.resolve(__dirname, '..', '..');

function readJson(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(ROOT, name), 'utf8'));
}

describe('the Node the README asks for', () => {
  const pkg = readJson('package.json');
  const lock = readJson('package-lock.json');
  const oldest = semver.minVersion(pkg.engines.node);

  it('is the one package.json asks for', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const named = /\bNode (\d+)\b/.exec(readme);
    expect(named).not.toBeNull();
    expect(oldest).not.toBeNull();
    expect(oldest!.major).toBe(Number(named![1]));
  });

  it('is accepted by every locked package that names its Node', () => {
    const refused: string[] = [];
    let checked = 0;
    for (const [where, entry] of Object.entries<any>(lock.packages)) {
      const wanted = entry?.engines?.node;
      // engines may be an old-style array; only a range string is a rule.
      if (typeof wanted !== 'string' || !semver.validRange(wanted)) {
        continue;
      }
      checked++;
      if (!semver.satisfies(oldest!, wanted, { includePrerelease: true })) {
        refused.push(`${where || 'the project'} (${entry.version}): ${wanted}`);
      }
    }
    expect(checked).toBeGreaterThan(100);
    expect(refused).toEqual([]);
  });

  it('is enforced by npm ci, not only warned about', () => {
    const npmrc = fs.readFileSync(path.join(ROOT, '.npmrc'), 'utf8');
    expect(npmrc).toMatch(/^engine-strict=true$/m);
  });
});
