import {
  FINDING_RULES,
  findings,
  fixCommand,
  splitAtFloor,
  summarizeFindings
} from '../../../src/analysis/findings';
import { CommandIDs } from '../../../src/tokens';
import { c08Inventory, gpuSample } from '../fixtures';
import { MiB } from './helpers';

describe('findings', () => {
  it('runs every rule and sorts largest first', () => {
    const list = findings({
      inventory: c08Inventory(),
      sample: gpuSample(8000 * MiB, 80_000 * MiB),
      hello: null
    });
    expect(list.map(f => f.kind)).toEqual([
      'graph-holder',
      'cuda-context',
      'traceback-tensors',
      'owner-object'
    ]);
    // one scale (issue 28, item 5): on an 80,000 MiB device a warning starts
    // at 400 MiB (0.5 %): the 1 GiB of graphs, not the 256 MiB traceback
    expect(summarizeFindings(list)).toEqual({
      warnings: 1,
      warningBytes: 1024 * MiB,
      infos: 3
    });
    expect(FINDING_RULES).toHaveLength(16);
  });

  it('leaves findings under the floor out and keeps those that hold no bytes (issue 28, item 5)', () => {
    const list = findings({
      inventory: c08Inventory(),
      sample: gpuSample(8000 * MiB, 80_000 * MiB),
      hello: null
    });
    // a 4 B loss kept by a variable, and a finding about no memory at all
    const tiny = { ...list[0], id: 'graph-holder:tiny', bytes: { cpu: 4 } };
    const none = { ...list[1], id: 'no-bytes', bytes: {} };
    const all = [...list, tiny, none];
    const { shown, small } = splitAtFloor(all, 1);
    expect(small.map(f => f.id)).toEqual(['graph-holder:tiny']);
    expect(shown).toEqual([...list, none]);
    // exactly at the floor is shown; a floor of 0 shows everything
    expect(
      splitAtFloor([{ ...tiny, bytes: { 'cuda:0': MiB } }], 1).small
    ).toEqual([]);
    expect(splitAtFloor(all, 0)).toEqual({ shown: all, small: [] });
    // the bytes of all devices together
    expect(
      splitAtFloor([{ ...tiny, bytes: { cpu: MiB / 2, 'cuda:0': MiB / 2 } }], 1)
        .small
    ).toEqual([]);
  });

  it('no facts, no findings', () => {
    expect(findings({ inventory: null, sample: null, hello: null })).toEqual(
      []
    );
  });

  it('maps each fix to its command', () => {
    expect(fixCommand({ kind: 'clean', plan: {} }, 'k')).toEqual({
      id: CommandIDs.clean,
      args: { kernelId: 'k' }
    });
    expect(
      fixCommand({ kind: 'clean', plan: { modelId: '0x1' } }, 'k')
    ).toEqual({
      id: CommandIDs.freeModel,
      args: { kernelId: 'k', modelId: '0x1' }
    });
    expect(
      fixCommand({ kind: 'delete', modelId: '0x1', names: ['m'] }, 'k')
    ).toEqual({
      id: CommandIDs.deleteModel,
      args: { kernelId: 'k', modelId: '0x1', names: ['m'] }
    });
    expect(fixCommand({ kind: 'detach', name: 'v' }, 'k')).toEqual({
      id: CommandIDs.fixGraphHolder,
      args: { kernelId: 'k', name: 'v' }
    });
    expect(fixCommand({ kind: 'restart', bytes: {} }, 'k')).toEqual({
      id: CommandIDs.restartKernel,
      args: { kernelId: 'k' }
    });
    expect(fixCommand({ kind: 'none' }, 'k')).toBeNull();
  });
});
