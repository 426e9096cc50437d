/*
 * Accessibility fixes to what Material builds in the browser. Each answers a violation
 * that axe-core found on the built site (tests/site/test_site_a11y.py):
 *
 *  - a region that scrolls sideways (a wide table, display math, a long code line, a
 *    notebook output) gets tabindex="0", so a keyboard can reach and scroll it
 *    (scrollable-region-focusable). Material does this for code blocks only, and only
 *    where the pointer can hover;
 *  - a code annotation's marker, a link whose number is drawn by CSS, gets a name
 *    ("Annotation 3") that a screen reader can say (link-name);
 *  - the search dialog gets the name of its input (aria-dialog-name). Copying
 *    Material's whole search partial to add one attribute would tie us to its markup.
 *
 * Material adds annotations after the load, and KaTeX widens display math: a
 * MutationObserver and the resize event run the fixes again.
 */
(function () {
  "use strict";

  var SCROLLERS = ".md-content div, .md-content pre, .md-content code, .md-content table";

  function scrolls(el) {
    if (el.scrollWidth <= el.clientWidth + 1 && el.scrollHeight <= el.clientHeight + 1) return false;
    var style = getComputedStyle(el);
    return /(auto|scroll)/.test(style.overflowX + " " + style.overflowY);
  }

  function fix() {
    document.querySelectorAll(SCROLLERS).forEach(function (el) {
      if (!el.hasAttribute("tabindex") && scrolls(el)) el.setAttribute("tabindex", "0");
    });
    document.querySelectorAll(".md-annotation__index:not([aria-label])").forEach(function (a) {
      var id = a.querySelector("[data-md-annotation-id]");
      a.setAttribute("aria-label", "Annotation " + (id ? id.getAttribute("data-md-annotation-id") : ""));
    });
    var dialog = document.querySelector('.md-search[role="dialog"]:not([aria-label])');
    var input = document.querySelector(".md-search__input");
    if (dialog) dialog.setAttribute("aria-label", (input && input.getAttribute("aria-label")) || "Search");
  }

  var pending = false;
  function later() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () {
      pending = false;
      fix();
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(later);
  } else {
    document.addEventListener("DOMContentLoaded", later);
  }
  window.addEventListener("resize", later);
  new MutationObserver(function (records) {
    // Our own attribute changes do not matter; new nodes (annotations, tooltips) do.
    for (var i = 0; i < records.length; i++) {
      if (records[i].addedNodes.length) return later();
    }
  }).observe(document.body, { childList: true, subtree: true });
})();
