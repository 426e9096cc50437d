/*
 * Render the math that pymdownx.arithmatex (generic mode) leaves in the page.
 *
 * arithmatex wraps every formula in an element of class "arithmatex" holding
 * the TeX between \( \) (inline) or \[ \] (display). KaTeX and its auto-render
 * extension are served from this site (docs/assets/katex), never from a CDN.
 *
 * Two triggers:
 *  - Material's `document$` observable, which fires on the first load and after
 *    every instant-navigation page swap;
 *  - a MutationObserver, because Material builds some content after the page
 *    loads (code-annotation tooltips are moved into place later), and math in
 *    there would otherwise stay raw TeX.
 *
 * Each element is rendered once; the data attribute keeps the observer from
 * re-processing what it has just rendered.
 */
(function () {
  "use strict";

  var DONE = "data-katex-rendered";

  var options = {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false, // a bad formula shows as .katex-error (the site test looks for it)
  };

  // Notebook pages (mkdocs-jupyter) leave TeX in markdown cells as typed,
  // with Jupyter's $…$ and $$…$$ delimiters and no arithmatex wrapper.
  var notebookOptions = {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "\\[", right: "\\]", display: true },
      { left: "$", right: "$", display: false },
      { left: "\\(", right: "\\)", display: false },
    ],
    throwOnError: false,
  };

  function collect(root, selector) {
    var nodes = [];
    if (root.nodeType === 1 && root.matches(selector)) nodes.push(root);
    if (root.querySelectorAll) {
      nodes = nodes.concat(Array.prototype.slice.call(root.querySelectorAll(selector)));
    }
    return nodes;
  }

  function renderIn(root) {
    if (typeof renderMathInElement !== "function") return;
    [[".arithmatex", options], [".jp-RenderedMarkdown", notebookOptions]].forEach(function (pair) {
      collect(root, pair[0]).forEach(function (el) {
        if (el.hasAttribute(DONE)) return;
        el.setAttribute(DONE, "");
        renderMathInElement(el, pair[1]);
      });
    });
  }

  function renderAll() {
    renderIn(document.body);
  }

  var observer = new MutationObserver(function (mutations) {
    mutations.forEach(function (m) {
      m.addedNodes.forEach(function (node) {
        if (node.nodeType === 1) renderIn(node);
      });
    });
  });

  function start() {
    observer.observe(document.body, { childList: true, subtree: true });
    if (typeof document$ !== "undefined") {
      document$.subscribe(renderAll); // Material: every page load, instant navigation included
    } else {
      renderAll();
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
