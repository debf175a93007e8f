// The console reads without this file; it adds confirmations before
// destructive forms and refreshes the cluster page's charts.
document.addEventListener("submit", function (e) {
  var msg = e.target.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) e.preventDefault();
});
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("img[data-refresh]").forEach(function (img) {
    var base = img.src.split("&t=")[0];
    setInterval(function () { img.src = base + "&t=" + Date.now(); }, 1000 * Number(img.getAttribute("data-refresh")));
  });
});
