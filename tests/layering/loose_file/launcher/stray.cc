// A fixture for the layer checks: a source file directly in launcher/, in no layer's folder. The
// include check must refuse it (tests/layering/CMakeLists.txt); it is never compiled.
int Stray() { return 0; }
