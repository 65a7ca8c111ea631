// Turbopack (the default bundler of `next build` since Next 16) has no equivalent of webpack's
// `resolve.extensionAlias` yet (vercel/next.js#82945), and the server code here imports
// TypeScript NodeNext-style: `import { x } from './file.js'` for file.ts. This loader drops
// `.js` from relative specifiers in the project's own .ts files (next.config.mjs applies it to
// non-node_modules files only), so the bundler's extension search finds file.ts, or a real
// file.js. `next build --webpack` uses `extensionAlias` instead.
const RELATIVE_JS = /(\bfrom|\bimport)(\s*\(?\s*)(['"])(\.{1,2}\/[^'"\n]*?)\.js\3/g;

module.exports = function tsImportsLoader(source) {
  return source.replace(RELATIVE_JS, '$1$2$3$4$3');
};
