/* stands in for uPlot when web/node_modules was not installed at build time */
window.uPlot = null;
