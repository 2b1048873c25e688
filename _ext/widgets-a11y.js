// Loaded before the ipywidgets HTML manager (embed-amd.js) on pages with widgets.
// The manager draws each slider's handle as a focusable <div role="slider"> with no accessible name: a screen
// reader announces "slider, 4" without saying which. This names every handle, as soon as it is drawn, by the
// slider's own description label (aria-labelledby); a slider without a description gets the name "slider".
(function () {
  var count = 0;

  function name(handle) {
    var box = handle.closest(".widget-slider, .widget-inline-hbox");
    var label = box && box.querySelector(".widget-label");
    if (label && label.textContent.trim()) {
      if (!label.id) label.id = "widget-label-" + (++count);
      handle.setAttribute("aria-labelledby", label.id);
    } else {
      handle.setAttribute("aria-label", "slider");
    }
  }

  function nameAll() {
    document.querySelectorAll(".noUi-handle:not([aria-label]):not([aria-labelledby])").forEach(name);
  }

  new MutationObserver(nameAll).observe(document.documentElement, {childList: true, subtree: true});
})();
