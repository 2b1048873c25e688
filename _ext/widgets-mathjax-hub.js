// Loaded before the ipywidgets HTML manager (embed-amd.js) on pages with widgets.
// The manager typesets widget labels with MathJax 2's API, `MathJax.Hub.Queue(["Typeset", MathJax.Hub, element])`,
// whenever `window.MathJax` exists; the site runs MathJax 3, which has no `Hub` (an uncaught TypeError per label).
// This gives MathJax 3 that one call: each queued element is typeset with `MathJax.typesetPromise`, one after
// another on MathJax's startup promise. MathJax 3 replaces the `window.MathJax` configuration object with itself
// when it loads (deferred, after this script), so the Hub is put on both: on the configuration object for labels
// rendered before MathJax has loaded (kept until it is ready), and on MathJax itself from its `startup.ready` on.
// A page without MathJax (no math on it) gets nothing: the manager then never calls the Hub.
(function () {
  var config = window.MathJax;
  if (!config) return;
  var pending = [];

  function typeset(element) {
    var mj = window.MathJax;
    if (!mj || !mj.startup || !mj.startup.promise || !mj.typesetPromise) {
      pending.push(element);   // MathJax 3 not ready yet: typeset when it is
      return;
    }
    mj.startup.promise = mj.startup.promise
      .then(function () { return mj.typesetPromise([element]); })
      .catch(function (err) { console.warn("MathJax could not typeset a widget label:", err); });
  }

  var hub = {
    Queue: function () {
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) typeset(job[2]);
      }
    }
  };

  function attach() {
    window.MathJax.Hub = hub;
    pending.splice(0).forEach(typeset);
  }

  config.Hub = hub;
  if (config.version) {   // MathJax 3 already loaded (not on this site: it loads deferred, after this script)
    config.startup.promise.then(attach);
    return;
  }
  config.startup = config.startup || {};
  var ready = config.startup.ready;
  config.startup.ready = function () {
    if (ready) ready(); else window.MathJax.startup.defaultReady();
    window.MathJax.Hub = hub;              // before any label can be rendered (ready runs as MathJax loads)
    window.MathJax.startup.promise.then(attach);
  };
})();
