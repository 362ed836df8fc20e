// jsdom has no asynchronous Clipboard API; @jupyterlab/apputils warns at import
// without one. The unit tests never use the clipboard, so an inert stand-in is enough.
if (typeof navigator !== 'undefined' && !navigator.clipboard) {
  Object.defineProperty(navigator, 'clipboard', {
    configurable: true,
    value: {
      read: async () => [],
      readText: async () => '',
      write: async () => undefined,
      writeText: async () => undefined
    }
  });
}

// jsdom's crypto has no SubtleCrypto; the browser's (a secure context) has. The
// clean-cell fingerprints use crypto.subtle.digest: Node's WebCrypto stands in.
if (typeof globalThis.crypto !== 'undefined' && !globalThis.crypto.subtle) {
  const { webcrypto } = require('crypto');
  Object.defineProperty(globalThis.crypto, 'subtle', {
    configurable: true,
    value: webcrypto.subtle
  });
}
