int Lower();
int Higher() { return 41; }
int UsesLower() { return Lower(); }
