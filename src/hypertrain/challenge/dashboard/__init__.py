"""Static files of the live dashboard (index.html, app.js, style.css), served as-is."""
