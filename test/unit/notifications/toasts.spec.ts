import { Notification } from '@jupyterlab/apputils';
import { IToast, ToastBook } from '../../../src/notifications/toasts';

const all = () => Notification.manager.notifications;

function toast(overrides: Partial<IToast> = {}): IToast {
  return {
    key: '',
    type: 'warning',
    message: 'first',
    signature: 'a',
    autoClose: false,
    actions: [{ label: 'Do', callback: () => undefined }],
    ...overrides
  };
}

describe('ToastBook', () => {
  afterEach(() => Notification.dismiss());

  it('raises a new toast with its message, type, autoClose and actions', () => {
    const book = new ToastBook('update');
    expect(book.show('k1', toast())).toBe('raised');
    expect(all()).toHaveLength(1);
    const [raised] = all();
    expect(raised.id).toBe(book.idOf('k1'));
    expect(raised.message).toBe('first');
    expect(raised.type).toBe('warning');
    expect(raised.options.autoClose).toBe(false);
    expect(raised.options.actions?.map(a => a.label)).toEqual(['Do']);
  });

  it('raises without actions when a toast has none', () => {
    const book = new ToastBook('update');
    book.show('k1', toast({ actions: undefined, autoClose: 8000 }));
    expect(all()[0].options.actions).toBeUndefined();
    expect(all()[0].options.autoClose).toBe(8000);
  });

  it('updates in place when the signature changes, and keeps a same one', () => {
    const book = new ToastBook('update');
    book.show('k1', toast());
    const id = book.idOf('k1');
    expect(book.show('k1', toast({ message: 'same signature' }))).toBe('kept');
    expect(all()[0].message).toBe('first');
    expect(book.show('k1', toast({ message: 'second', signature: 'b' }))).toBe(
      'updated'
    );
    expect(all()).toHaveLength(1);
    expect(all()[0].id).toBe(id);
    expect(all()[0].message).toBe('second');
  });

  it('updates on every request when the toast has no signature', () => {
    const book = new ToastBook('update');
    book.show('k1', toast({ signature: undefined }));
    expect(book.show('k1', toast({ signature: undefined }))).toBe('updated');
    expect(all()).toHaveLength(1);
  });

  it('keys toasts per kernel and key', () => {
    const book = new ToastBook('update');
    book.show('k1', toast({ key: 'x' }));
    book.show('k1', toast({ key: 'y' }));
    book.show('k2', toast({ key: 'x' }));
    expect(all()).toHaveLength(3);
    book.dismiss('k1', 'x');
    expect(all()).toHaveLength(2);
    expect(book.idOf('k1', 'x')).toBeNull();
    expect(book.idOf('k1', 'y')).not.toBeNull();
    expect(book.idOf('k2', 'x')).not.toBeNull();
    book.dismiss('k1');
    expect(all()).toHaveLength(1);
    expect(all()[0].id).toBe(book.idOf('k2', 'x'));
  });

  it('update: a toast the user closed is raised anew on the next change', () => {
    const book = new ToastBook('update');
    book.show('k1', toast());
    const first = book.idOf('k1')!;
    Notification.dismiss(first); // the user closes it
    expect(book.show('k1', toast())).toBe('kept'); // same signature: nothing new
    expect(book.show('k1', toast({ signature: 'b' }))).toBe('raised');
    expect(all()).toHaveLength(1);
    expect(book.idOf('k1')).not.toBe(first);
    expect(book.isClosed('k1')).toBe(false);
  });

  it('quiet-after-close: remembers a toast the user closed until it is dismissed', () => {
    const book = new ToastBook('quiet-after-close');
    book.show('k1', toast());
    Notification.dismiss(book.idOf('k1')!); // the user closes it
    expect(book.show('k1', toast({ signature: 'b' }))).toBe('kept');
    expect(book.isClosed('k1')).toBe(true);
    expect(book.show('k1', toast({ signature: 'c' }))).toBe('kept');
    expect(all()).toHaveLength(0);
    // The finding went away: the book forgets the closed toast...
    book.dismiss('k1');
    expect(book.isClosed('k1')).toBe(false);
    // ...and the next one is raised.
    expect(book.show('k1', toast({ signature: 'd' }))).toBe('raised');
    expect(all()).toHaveLength(1);
  });

  it('once: raises a key once, keeps it true on screen, never again after it was dismissed', () => {
    const book = new ToastBook('once');
    expect(book.show('k1', toast({ key: 'v' }))).toBe('raised');
    expect(book.show('k1', toast({ key: 'v' }))).toBe('kept');
    // The figures changed while it is on screen: updated in place, not raised.
    expect(
      book.show('k1', toast({ key: 'v', signature: 'b', message: 'second' }))
    ).toBe('updated');
    expect(all()).toHaveLength(1);
    expect(all()[0].message).toBe('second');
    book.dismiss('k1', 'v');
    expect(all()).toHaveLength(0);
    expect(book.show('k1', toast({ key: 'v' }))).toBe('kept');
    expect(all()).toHaveLength(0);
    // Another kernel, another key: raised.
    expect(book.show('k2', toast({ key: 'v' }))).toBe('raised');
    // Forgetting the kernel forgets what was raised.
    book.forget('k1');
    expect(book.show('k1', toast({ key: 'v' }))).toBe('raised');
  });

  it('once: a toast the user closed is neither updated nor raised again', () => {
    const book = new ToastBook('once');
    book.show('k1', toast({ key: 'v' }));
    Notification.dismiss(book.idOf('k1', 'v')!);
    expect(book.show('k1', toast({ key: 'v', signature: 'b' }))).toBe('kept');
    expect(book.show('k1', toast({ key: 'v', signature: 'c' }))).toBe('kept');
    expect(all()).toHaveLength(0);
  });

  it('sync dismisses the toasts of the kernel that are no longer wanted', () => {
    const book = new ToastBook('update');
    book.sync('k1', [toast({ key: 'a' }), toast({ key: 'b' })]);
    book.sync('k2', [toast({ key: 'a' })]);
    expect(all()).toHaveLength(3);
    const kept = book.idOf('k1', 'b');
    book.sync('k1', [toast({ key: 'b' })]);
    expect(all()).toHaveLength(2);
    expect(book.idOf('k1', 'a')).toBeNull();
    expect(book.idOf('k1', 'b')).toBe(kept);
    book.sync('k1', []);
    expect(all().map(n => n.id)).toEqual([book.idOf('k2', 'a')]);
  });

  it('forget leaves the toasts on screen and raises a new one next time', () => {
    const book = new ToastBook('update');
    book.show('k1', toast());
    const first = book.idOf('k1');
    book.forget('k1');
    expect(all().map(n => n.id)).toEqual([first]);
    expect(book.idOf('k1')).toBeNull();
    expect(book.show('k1', toast())).toBe('raised');
    expect(all()).toHaveLength(2);
  });
});
