// Loaded between require.js and the ipywidgets HTML manager (embed-amd.js) on pages with widgets.
// The manager finds its bundled icon fonts next to the URL RequireJS gives its modules; by default
// that is the page's own folder (404s). Point those module names at the manager's dist/ folder,
// given by this tag's data-dist attribute (absolute, or relative to this script).
(function () {
  var tag = document.currentScript;
  var dist = new URL(tag.getAttribute("data-dist"), tag.src).href;
  var names = ["base", "controls", "base7", "controls7", "html-manager"];
  var paths = {"@jupyter-widgets/html-manager/dist/libembed-amd": dist + "libembed-amd"};
  names.forEach(function (n) { paths["@jupyter-widgets/" + n] = dist + n; });
  require.config({paths: paths});
})();
