// ThreadSanitizer builds only (tests/cpp/CMakeLists.txt adds this file when CMAKE_CXX_FLAGS has
// -fsanitize=thread): an instrumented std::_Rb_tree_insert_and_rebalance for the test program.
//
// Why. std::map's insertion links and rebalances its new node in this one function, which
// libstdc++ compiles into libstdc++.so: Debian's build is not instrumented, so TSan sees none
// of its writes (the new node's links, its neighbours', the root), and a lookup racing with an
// insertion is invisible unless the lookup happens to walk through the new node. Defined here,
// in the test program, it takes precedence over the library's for every call the program's own
// (instrumented) code makes, the core's included, and TSan sees the writes.
//
// It is the textbook red-black insertion (Cormen et al., "Introduction to Algorithms", 13.3),
// on libstdc++'s node layout (color, parent, left, right) and header conventions (header's
// parent is the root, its left the leftmost node, its right the rightmost): any valid
// rebalancing keeps every inline member of std::_Rb_tree correct, and the library's erase
// rebalancing works on any valid red-black tree. The tests check std::map through the core's
// own maps (weights, plan pools) at every insertion they make.
#include <bits/stl_tree.h>

namespace std {

namespace {

using Node = _Rb_tree_node_base;

void
rotateLeft(Node* x, Node*& root)
{
    Node* y = x->_M_right;
    x->_M_right = y->_M_left;
    if (y->_M_left) {
        y->_M_left->_M_parent = x;
    }
    y->_M_parent = x->_M_parent;
    if (x == root) {
        root = y;
    } else if (x == x->_M_parent->_M_left) {
        x->_M_parent->_M_left = y;
    } else {
        x->_M_parent->_M_right = y;
    }
    y->_M_left = x;
    x->_M_parent = y;
}

void
rotateRight(Node* x, Node*& root)
{
    Node* y = x->_M_left;
    x->_M_left = y->_M_right;
    if (y->_M_right) {
        y->_M_right->_M_parent = x;
    }
    y->_M_parent = x->_M_parent;
    if (x == root) {
        root = y;
    } else if (x == x->_M_parent->_M_right) {
        x->_M_parent->_M_right = y;
    } else {
        x->_M_parent->_M_left = y;
    }
    y->_M_right = x;
    x->_M_parent = y;
}

} // namespace

void
_Rb_tree_insert_and_rebalance(const bool insertLeft, Node* x, Node* p, Node& header) throw()
{
    Node*& root = header._M_parent;
    x->_M_parent = p;
    x->_M_left = nullptr;
    x->_M_right = nullptr;
    x->_M_color = _S_red;
    if (insertLeft) {
        p->_M_left = x;   // the leftmost too when p is the header (an empty tree)
        if (p == &header) {
            header._M_parent = x;
            header._M_right = x;
        } else if (p == header._M_left) {
            header._M_left = x;
        }
    } else {
        p->_M_right = x;
        if (p == header._M_right) {
            header._M_right = x;
        }
    }
    while (x != root && x->_M_parent->_M_color == _S_red) {
        Node* grand = x->_M_parent->_M_parent;
        bool leftSide = x->_M_parent == grand->_M_left;
        Node* uncle = leftSide ? grand->_M_right : grand->_M_left;
        if (uncle && uncle->_M_color == _S_red) {
            x->_M_parent->_M_color = _S_black;
            uncle->_M_color = _S_black;
            grand->_M_color = _S_red;
            x = grand;
        } else if (leftSide) {
            if (x == x->_M_parent->_M_right) {
                x = x->_M_parent;
                rotateLeft(x, root);
            }
            x->_M_parent->_M_color = _S_black;
            grand->_M_color = _S_red;
            rotateRight(grand, root);
        } else {
            if (x == x->_M_parent->_M_left) {
                x = x->_M_parent;
                rotateRight(x, root);
            }
            x->_M_parent->_M_color = _S_black;
            grand->_M_color = _S_red;
            rotateLeft(grand, root);
        }
    }
    root->_M_color = _S_black;
}

} // namespace std
