mod mesh;
