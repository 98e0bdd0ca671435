// The entry point of the layer checks (tests/layering/CMakeLists.txt): each check links one
// layer's whole archive against only the layers it may use, so this program is never run; its
// link is the test.
int main() { return 0; }
