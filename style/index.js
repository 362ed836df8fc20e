import './base.css';
import './popup.css';
