// The lower layer, calling up into the higher one (declared here as an inverted include would).
int Higher();
int Lower() { return Higher() + 1; }
